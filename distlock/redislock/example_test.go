package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Charge an order exactly once across 5 instances: each instance takes the
// lock, and the winner charges through a fenced write, so even a holder
// paused past its lease could not charge after a successor.
func Example() {
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: getenv("CONCURKIT_REDIS_ADDR", "127.0.0.1:16379")})
	defer rdb.Close()
	pool, err := pgxpool.New(ctx, getenv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	// Tokens come from a PostgreSQL sequence; the orders table is fenced
	// by its max_seen_token column.
	for _, q := range []string{
		`DROP TABLE IF EXISTS example_redis_orders`,
		`CREATE TABLE example_redis_orders (id text PRIMARY KEY, state text NOT NULL, max_seen_token bigint NOT NULL DEFAULT 0)`,
		`INSERT INTO example_redis_orders (id, state) VALUES ('order-42', 'pending')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := fencedpg.CreateSequence(ctx, pool, "example_redis_tokens"); err != nil {
		fmt.Println(err)
		return
	}
	tokens, err := fencedpg.NewSequence(pool, "example_redis_tokens")
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := redislock.New(rdb, &redislock.Config{Source: tokens})
	if err != nil {
		fmt.Println(err)
		return
	}
	orders := fenced.Table{Name: "example_redis_orders"}

	charged := make([]bool, 5)
	var wg sync.WaitGroup
	for instance := range 5 {
		wg.Go(func() {
			lease, err := locker.Acquire(ctx, "example:redis:order-42", &distlock.Options{TTL: 5 * time.Second})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer lease.Release(ctx)
			var state string
			if err := pool.QueryRow(lease.Context(), `SELECT state FROM example_redis_orders WHERE id = 'order-42'`).Scan(&state); err != nil {
				fmt.Println(err)
				return
			}
			if state == "charged" {
				return // another instance was first
			}
			// ... call the payment provider with an idempotency key ...
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
	_ = pool.QueryRow(ctx, `SELECT state FROM example_redis_orders WHERE id = 'order-42'`).Scan(&state)
	fmt.Println("instances that charged:", n)
	fmt.Println("order-42:", state)
	// Output:
	// instances that charged: 1
	// order-42: charged
}

// TryAcquire fails at once while another holder has the lock.
func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: getenv("CONCURKIT_REDIS_ADDR", "127.0.0.1:16379")})
	defer rdb.Close()
	pool, err := pgxpool.New(ctx, getenv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if err := fencedpg.CreateSequence(ctx, pool, "example_redis_tokens"); err != nil {
		fmt.Println(err)
		return
	}
	tokens, _ := fencedpg.NewSequence(pool, "example_redis_tokens")
	locker, err := redislock.New(rdb, &redislock.Config{Source: tokens})
	if err != nil {
		fmt.Println(err)
		return
	}
	first, err := locker.TryAcquire(ctx, "example:redis:report", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryAcquire(ctx, "example:redis:report", nil)
	fmt.Println("second TryAcquire while held:", errors.Is(err, distlock.ErrNotAcquired))
	_ = first.Release(ctx)
	again, err := locker.TryAcquire(ctx, "example:redis:report", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after Release: true", again.Token() > first.Token())
	_ = again.Release(ctx)
	// Output:
	// second TryAcquire while held: true
	// after Release: true true
}

// The Redis keys of a lock: the hash tag keeps a lock and its fence record
// in one Redis Cluster slot, and a key that looks like another key's fence
// record is a lock of its own.
func ExampleLockKey() {
	for _, key := range []string{"order-42", "order-42:fence", "{order-42}"} {
		fmt.Println(redislock.LockKey(key), redislock.FenceKey(key))
	}
	// Output:
	// ck:{order-42}:lock ck:{order-42}:fence
	// ck:{order-42:fence}:lock ck:{order-42:fence}:fence
	// ck:{%7Border-42%7D}:lock ck:{%7Border-42%7D}:fence
}
