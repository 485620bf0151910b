package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/distlock/rwlock"
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

// examplePool returns a pool large enough for a writer: on pglock every
// lease holds a connection, and a writer holds Readers+1 leases.
func examplePool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(exampleURL())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 32
	return pgxpool.NewWithConfig(ctx, cfg)
}

// Three readers hold the lock at once — each waits inside until all
// three are in — and a writer gets in once they left.
func ExampleNew() {
	ctx := context.Background()
	pool, err := examplePool(ctx)
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
	rw, err := rwlock.New(locker, fmt.Sprintf("catalog-%d", rand.Uint32()), &rwlock.Config{Readers: 4})
	if err != nil {
		fmt.Println(err)
		return
	}

	var inside sync.WaitGroup
	inside.Add(3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			// Readers may share an RWLock; its Lock is refused
			// (ErrUpgrade) while any read of it is held.
			r, err := rw.RLock(ctx)
			if err != nil {
				fmt.Println(err)
				inside.Done()
				return
			}
			defer r.Release(ctx)
			inside.Done()
			inside.Wait() // ... read the catalog, alongside the others
		})
	}
	wg.Wait()
	fmt.Println("three readers at once")

	w, err := rw.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Release(ctx)
	fmt.Println("writer alone:", w.Valid())
	// Output:
	// three readers at once
	// writer alone: true
}

// The writer fences what it writes with its Token: a writer paused past
// its lock, whose successor wrote meanwhile, is refused by storage.
func ExampleRWLock_Lock() {
	ctx := context.Background()
	pool, err := examplePool(ctx)
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
	name := "prices-" + schemaName
	rw, err := rwlock.New(locker, name, &rwlock.Config{Readers: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	fence := fenced.Fence{Schema: schemaName}
	admit := func(w *rwlock.Write) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// ... the writer's updates, in the same transaction
			return fencedpg.Admit(ctx, tx, fence, name, w.Token())
		})
	}

	old, err := rw.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("writer:", admit(old))
	_ = old.Release(ctx) // as if its lock had run out while it was paused

	next, err := rw.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Release(ctx)
	fmt.Println("next writer:", admit(next))
	fmt.Println("paused writer refused:", errors.Is(admit(old), fenced.ErrStaleToken))
	// Output:
	// writer: <nil>
	// next writer: <nil>
	// paused writer refused: true
}

// A read lock cannot be upgraded: Lock on the RWLock that holds the read
// fails at once instead of waiting for its own reader forever. Release the
// read, Lock, and read again.
func ExampleErrUpgrade() {
	ctx := context.Background()
	pool, err := examplePool(ctx)
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
	rw, err := rwlock.New(locker, fmt.Sprintf("stock-%d", rand.Uint32()), &rwlock.Config{Readers: 4})
	if err != nil {
		fmt.Println(err)
		return
	}

	r, err := rw.RLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... the read says a write is needed
	_, err = rw.Lock(ctx)
	fmt.Println("upgrade refused:", errors.Is(err, rwlock.ErrUpgrade))

	_ = r.Release(ctx)
	w, err := rw.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Release(ctx)
	// ... read again under the write lock: another writer may have come
	// in between, then write with w.Token()
	fmt.Println("write lock after releasing the read:", w.Valid())
	// Output:
	// upgrade refused: true
	// write lock after releasing the read: true
}
