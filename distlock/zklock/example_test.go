package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Five instances of a payment service receive the same "charge order 42"
// message. Each has its own ZooKeeper session; they compete for the lock
// of the order. Whoever holds it checks the order and charges it through a
// fenced write, so even a holder that lost its lock unnoticed could not
// charge again: storage would reject its token.
func ExampleLocker_Acquire() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a server that is down must not hang the example
	defer cancel()
	pgcfg, err := pgxpool.ParseConfig(getenv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		fmt.Println("error:", err) // e.g. a server is not running
		return
	}
	pgcfg.MaxConns = 1 // one session, so the TEMP table is visible to all instances
	db, err := pgxpool.NewWithConfig(ctx, pgcfg)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer db.Close()
	if _, err := db.Exec(ctx, `CREATE TEMP TABLE orders (id bigint PRIMARY KEY, charged boolean NOT NULL DEFAULT false,
		charged_by text, max_seen_token bigint NOT NULL DEFAULT 0); INSERT INTO orders (id) VALUES (42)`); err != nil {
		fmt.Println("error:", err)
		return
	}
	servers := strings.Split(getenv("CONCURKIT_ZK_ADDR", "127.0.0.1:12181"), ",")
	key := fmt.Sprintf("order-42-%d", rand.Int64()) // a fresh lock per run

	var charges atomic.Int32
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			locker, err := zklock.New(servers, nil) // one per instance: its own session
			if err != nil {
				fmt.Println("error:", err)
				return
			}
			defer locker.Close(context.Background())
			lease, err := locker.Acquire(ctx, key, nil)
			if err != nil {
				fmt.Println("error:", err)
				return
			}
			defer lease.Release(ctx)

			var charged bool
			if err := db.QueryRow(lease.Context(), "SELECT charged FROM orders WHERE id = 42").Scan(&charged); err != nil || charged {
				return // already charged by an earlier holder
			}
			// ... call the payment provider with an idempotency key ...
			err = fencedpg.Update(lease.Context(), db, fenced.Table{Name: "orders"}, 42, lease.Token(),
				map[string]any{"charged": true, "charged_by": fmt.Sprint("instance-", i)})
			switch {
			case errors.Is(err, fenced.ErrStaleToken), errors.Is(err, distlock.ErrLeaseLost):
				return // lost the lock meanwhile: the new holder decides
			case err != nil:
				fmt.Println("error:", err)
				return
			}
			charges.Add(1)
		})
	}
	wg.Wait()

	var charged bool
	var token int64
	if err := db.QueryRow(ctx, "SELECT charged, max_seen_token FROM orders WHERE id = 42").Scan(&charged, &token); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("charged:", charged)
	fmt.Println("charges:", charges.Load())
	fmt.Println("fenced by a ZooKeeper czxid:", token > 0)
	// Output:
	// charged: true
	// charges: 1
	// fenced by a ZooKeeper czxid: true
}

// TryAcquire does not wait: while one holder has the lock, another attempt
// fails at once with distlock.ErrNotAcquired.
func ExampleLocker_TryAcquire() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := strings.Split(getenv("CONCURKIT_ZK_ADDR", "127.0.0.1:12181"), ",")
	locker, err := zklock.New(servers, &zklock.Config{Root: "/concurkit/examples"})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer locker.Close(context.Background())
	key := fmt.Sprintf("report-%d", rand.Int64())

	first, err := locker.TryAcquire(ctx, key, nil)
	fmt.Println("first:", err)
	if err != nil {
		return
	}
	_, err = locker.TryAcquire(ctx, key, nil)
	fmt.Println("second:", errors.Is(err, distlock.ErrNotAcquired))
	fmt.Println("release:", first.Release(ctx))
	again, err := locker.TryAcquire(ctx, key, nil)
	if err != nil {
		fmt.Println("after release:", err)
		return
	}
	fmt.Println("after release:", err, again.Token() > first.Token())
	_ = again.Release(ctx)
	// Output:
	// first: <nil>
	// second: true
	// release: <nil>
	// after release: <nil> true
}

// Close at shutdown: it releases the leases still held and ends the
// Locker's ZooKeeper sessions (the server deletes what is left of them).
func ExampleLocker_Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := strings.Split(getenv("CONCURKIT_ZK_ADDR", "127.0.0.1:12181"), ",")
	locker, err := zklock.New(servers, &zklock.Config{Root: "/concurkit/examples"})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	key := fmt.Sprintf("report-%d", rand.Int64())
	if _, err := locker.Acquire(ctx, key, nil); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("close:", locker.Close(ctx))
	_, err = locker.TryAcquire(ctx, key, nil)
	fmt.Println("after close:", errors.Is(err, distlock.ErrClosed))
	other, err := zklock.New(servers, &zklock.Config{Root: "/concurkit/examples"})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer other.Close(ctx)
	lease, err := other.TryAcquire(ctx, key, nil)
	fmt.Println("key free:", err == nil)
	if err == nil {
		_ = lease.Release(ctx)
	}
	// Output:
	// close: <nil>
	// after close: true
	// key free: true
}
