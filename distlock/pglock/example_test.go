package pglock_test

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
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

func exampleURL() string {
	if v := os.Getenv("CONCURKIT_POSTGRES_URL"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
}

// Five instances of a payment service race to charge order 42. The advisory
// lock serialises them; the fencing token, admitted in the same
// transaction as the charge, guarantees that an instance whose lock was
// lost (paused, session killed) can never charge after its successor.
func Example() {
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, exampleURL())
	if err != nil {
		fmt.Println(err) // a missing server fails this example only, not the test binary
		return
	}
	defer admin.Close()
	schemaName := fmt.Sprintf("example_%d", rand.Uint32())
	schema := pgx.Identifier{schemaName}.Sanitize()
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema+`;
		CREATE TABLE `+schema+`.orders (id bigint PRIMARY KEY, status text NOT NULL);
		CREATE TABLE `+schema+`.payments (order_id bigint NOT NULL, instance int NOT NULL, token bigint NOT NULL);
		CREATE TABLE `+schema+`.concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0);
		INSERT INTO `+schema+`.orders VALUES (42, 'pending')`); err != nil {
		fmt.Println(err)
		return
	}
	defer admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")

	var charged atomic.Int32
	var wg sync.WaitGroup
	for instance := range 5 {
		wg.Go(func() {
			pool, err := pgxpool.New(ctx, exampleURL()) // each instance: its own pool
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
			lease, err := locker.Acquire(ctx, "order-42", &distlock.Options{TTL: 10 * time.Second})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer lease.Release(ctx)
			err = pgx.BeginFunc(lease.Context(), pool, func(tx pgx.Tx) error {
				fence := fenced.Fence{Schema: schemaName}
				if err := fencedpg.Admit(ctx, tx, fence, "order-42", lease.Token()); err != nil {
					return err // a stale holder stops here
				}
				var status string
				if err := tx.QueryRow(ctx, "SELECT status FROM "+schema+".orders WHERE id = 42").Scan(&status); err != nil {
					return err
				}
				if status != "pending" {
					return nil // already charged by an earlier holder
				}
				if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".payments VALUES (42, $1, $2)", instance, int64(lease.Token())); err != nil {
					return err
				}
				charged.Add(1)
				_, err := tx.Exec(ctx, "UPDATE "+schema+".orders SET status = 'charged' WHERE id = 42")
				return err
			})
			if err != nil {
				fmt.Println(err)
				return
			}
		})
	}
	wg.Wait()

	var payments int
	var status string
	_ = admin.QueryRow(ctx, "SELECT count(*), (SELECT status FROM "+schema+".orders WHERE id = 42) FROM "+schema+".payments").Scan(&payments, &status)
	fmt.Println("instances that charged:", charged.Load())
	fmt.Println("payments:", payments, "order:", status)
	// Output:
	// instances that charged: 1
	// payments: 1 order: charged
}

// TryAcquire fails at once while another instance holds the key; each
// acquisition gets a higher fencing token.
func ExampleLocker_TryAcquire() {
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
	key := fmt.Sprintf("report-%d", rand.Uint32())
	first, err := locker.TryAcquire(ctx, key, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryAcquire(ctx, key, nil)
	fmt.Println(errors.Is(err, distlock.ErrNotAcquired))
	_ = first.Release(ctx)
	second, err := locker.TryAcquire(ctx, key, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Release(ctx)
	fmt.Println(second.Token() > first.Token())
	// Output:
	// true
	// true
}

// BackendPID names the server session that holds a lease's lock, as
// pg_locks and pg_stat_activity show it.
func ExampleBackendPID() {
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
	lease, err := locker.Acquire(ctx, fmt.Sprintf("report-%d", rand.Uint32()), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	pid, ok := pglock.BackendPID(lease)
	var holds bool
	err = pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 AND granted)`,
		int32(pid)).Scan(&holds)
	fmt.Println(ok, holds, err)
	// Output: true true <nil>
}

// Close at shutdown: it releases the leases still held (a deploy does not
// leave their keys locked until the TTL) and waits for the Locker's
// background work; call it before closing the pool.
func ExampleLocker_Close() {
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
	key := fmt.Sprintf("report-%d", rand.Uint32())
	if _, err := locker.Acquire(ctx, key, nil); err != nil {
		fmt.Println(err)
		return
	}
	shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Println("close:", locker.Close(shutdown))
	_, err = locker.Acquire(ctx, key, nil)
	fmt.Println("after close:", errors.Is(err, distlock.ErrClosed))

	other, err := pglock.New(pool, nil)
	if err != nil {
		fmt.Println(err)
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
