package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/distlock/semaphore"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

// The examples run on PostgreSQL advisory locks (pglock); any
// distlock.Locker works the same way.
func exampleURL() string {
	if v := os.Getenv("CONCURKIT_POSTGRES_URL"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
}

// Six workers share two permits: at most two of them render a report at
// any time, wherever they run.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleURL())
	if err != nil {
		fmt.Println(err) // a missing server fails this example only, not the test binary
		return
	}
	defer pool.Close()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close(ctx)
	sem, err := semaphore.New(locker, fmt.Sprintf("reports-%d", rand.Uint32()), 2, &semaphore.Config{TTL: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}

	var running, most, done atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			lease, err := sem.Acquire(ctx)
			if err != nil {
				fmt.Println(err)
				return
			}
			defer lease.Release(ctx)
			n := running.Add(1)
			for m := most.Load(); n > m; m = most.Load() {
				if most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(10 * time.Millisecond) // render the report
			running.Add(-1)
			done.Add(1)
		})
	}
	wg.Wait()
	fmt.Println("reports:", done.Load())
	fmt.Println("at most 2 at once:", most.Load() <= 2)
	// Output:
	// reports: 6
	// at most 2 at once: true
}

// TryAcquire takes a free permit or fails at once; the Key of the lease
// tells which permit it holds.
func ExampleSemaphore_TryAcquire() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close(ctx)
	name := fmt.Sprintf("exports-%d", rand.Uint32())
	sem, err := semaphore.New(locker, name, 2, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	first, err := sem.TryAcquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	second, err := sem.TryAcquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Release(ctx)
	fmt.Println("two permits:", first.Key() != second.Key())

	_, err = sem.TryAcquire(ctx)
	fmt.Println("third:", errors.Is(err, distlock.ErrNotAcquired))

	_ = first.Release(ctx)
	again, err := sem.TryAcquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer again.Release(ctx)
	fmt.Println("same permit again:", again.Key() == first.Key(), "higher token:", again.Token() > first.Token())
	// Output:
	// two permits: true
	// third: true
	// same permit again: true higher token: true
}

// Acquire waits for a permit. Its holder fences what it writes per
// permit: the resource is the lease's Key, the token its Token. A holder
// paused past its lease, whose permit went to another process meanwhile,
// is refused by storage.
func ExampleSemaphore_Acquire() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	schemaName := fmt.Sprintf("example_%d", rand.Uint32())
	schema := pgx.Identifier{schemaName}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+schema+`;
		CREATE TABLE `+schema+`.concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)`); err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	locker, err := pglock.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close(ctx)
	sem, err := semaphore.New(locker, "crawler-"+schemaName, 1, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fence := fenced.Fence{Schema: schemaName}
	admit := func(lease distlock.Lease) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// ... the holder's writes, in the same transaction
			return fencedpg.Admit(ctx, tx, fence, lease.Key(), lease.Token())
		})
	}

	old, err := sem.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("holder writes:", admit(old))
	_ = old.Release(ctx) // as if its lease had run out while it was paused

	next, err := sem.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Release(ctx)
	fmt.Println("successor writes:", admit(next))
	fmt.Println("paused holder refused:", errors.Is(admit(old), fenced.ErrStaleToken))
	// Output:
	// holder writes: <nil>
	// successor writes: <nil>
	// paused holder refused: true
}
