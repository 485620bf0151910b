package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Charge an order exactly once across 5 instances, with the lock held on a
// majority of 5 independent Redis masters and the charge written through
// a fenced update.
func Example() {
	ctx := context.Background()
	var masters []*goredis.Client
	for _, addr := range strings.Split(getenv("CONCURKIT_REDLOCK_ADDRS", "127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384"), ",") {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer c.Close()
		masters = append(masters, c)
	}
	pool, err := pgxpool.New(ctx, getenv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	for _, q := range []string{
		`DROP TABLE IF EXISTS example_redlock_orders`,
		`CREATE TABLE example_redlock_orders (id text PRIMARY KEY, state text NOT NULL, max_seen_token bigint NOT NULL DEFAULT 0)`,
		`INSERT INTO example_redlock_orders (id, state) VALUES ('order-42', 'pending')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := fencedpg.CreateSequence(ctx, pool, "example_redlock_tokens"); err != nil {
		fmt.Println(err)
		return
	}
	tokens, err := fencedpg.NewSequence(pool, "example_redlock_tokens")
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := redlock.New(masters, &redlock.Config{Source: tokens}) // quorum 3 of 5
	if err != nil {
		fmt.Println(err)
		return
	}
	orders := fenced.Table{Name: "example_redlock_orders"}

	charged := make([]bool, 5)
	var wg sync.WaitGroup
	for instance := range 5 {
		wg.Go(func() {
			lease, err := locker.Acquire(ctx, "example:redlock:order-42", &distlock.Options{TTL: 5 * time.Second})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer lease.Release(ctx)
			var state string
			if err := pool.QueryRow(lease.Context(), `SELECT state FROM example_redlock_orders WHERE id = 'order-42'`).Scan(&state); err != nil {
				fmt.Println(err)
				return
			}
			if state == "charged" {
				return
			}
			err = fencedpg.Update(lease.Context(), pool, orders, "order-42", lease.Token(),
				map[string]any{"state": "charged"})
			if err != nil { // fenced.ErrStaleToken if a successor took over
				fmt.Println(err)
				return
			}
			charged[instance] = true
		})
	}
	wg.Wait()

	n := 0
	for _, c := range charged {
		if c {
			n++
		}
	}
	var state string
	_ = pool.QueryRow(ctx, `SELECT state FROM example_redlock_orders WHERE id = 'order-42'`).Scan(&state)
	fmt.Println("instances that charged:", n)
	fmt.Println("order-42:", state)
	// Output:
	// instances that charged: 1
	// order-42: charged
}

// TryAcquire fails at once while another holder has the lock on a
// majority of the masters.
func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	var masters []*goredis.Client
	for _, addr := range strings.Split(getenv("CONCURKIT_REDLOCK_ADDRS", "127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384"), ",") {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer c.Close()
		masters = append(masters, c)
	}
	pool, err := pgxpool.New(ctx, getenv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if err := fencedpg.CreateSequence(ctx, pool, "example_redlock_tokens"); err != nil {
		fmt.Println(err)
		return
	}
	tokens, _ := fencedpg.NewSequence(pool, "example_redlock_tokens")
	locker, err := redlock.New(masters, &redlock.Config{Source: tokens})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("quorum:", locker.Quorum())
	first, err := locker.TryAcquire(ctx, "example:redlock:report", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryAcquire(ctx, "example:redlock:report", nil)
	fmt.Println("second TryAcquire while held:", errors.Is(err, distlock.ErrNotAcquired))
	_ = first.Release(ctx)
	again, err := locker.TryAcquire(ctx, "example:redlock:report", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after Release: true", again.Token() > first.Token())
	_ = again.Release(ctx)
	// Output:
	// quorum: 3
	// second TryAcquire while held: true
	// after Release: true true
}

// Each master stores a lock under the same keys as package distlock/redis.
func ExampleLockKey() {
	fmt.Println(redlock.LockKey("order-42"), redlock.FenceKey("order-42"))
	// Output: ck:{order-42}:lock ck:{order-42}:fence
}
