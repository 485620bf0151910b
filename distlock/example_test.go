package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
)

// runExclusive is backend-neutral: it works with any distlock.Locker.
// The work gets the lease's context, which ends when the lease is lost or
// expires, and the fencing token to hand to storage (package fenced).
func runExclusive(ctx context.Context, l distlock.Locker, key string, work func(ctx context.Context, lease distlock.Lease) error) error {
	lease, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second, AutoExtend: true})
	if err != nil {
		return err
	}
	// Release ignores the cancellation of ctx for its cleanup (a cancelled
	// request still releases its lock) and returns by ctx's deadline.
	defer lease.Release(ctx)
	return work(lease.Context(), lease)
}

// postgresLocker connects to the test PostgreSQL (CONCURKIT_POSTGRES_URL
// or the scripts' default port).
func postgresLocker(ctx context.Context) (distlock.Locker, func(), error) {
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	l, err := pglock.New(pool, nil)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return l, pool.Close, nil
}

func ExampleLocker() {
	ctx := context.Background()
	locker, closePool, err := postgresLocker(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closePool()
	key := fmt.Sprintf("nightly-report-%d", rand.Uint32())
	err = runExclusive(ctx, locker, key, func(ctx context.Context, lease distlock.Lease) error {
		// While we hold the lock, a second attempt fails at once.
		_, err := locker.TryAcquire(ctx, key, nil)
		fmt.Println("held elsewhere:", errors.Is(err, distlock.ErrNotAcquired))
		fmt.Println("token valid:", lease.Token().Valid())
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// held elsewhere: true
	// token valid: true
	// done: <nil>
}

func ExampleLease_Context() {
	ctx := context.Background()
	locker, closePool, err := postgresLocker(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closePool()
	lease, err := locker.Acquire(ctx, fmt.Sprintf("job-%d", rand.Uint32()), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lease.Release(ctx)
	<-lease.Context().Done()
	cause := context.Cause(lease.Context())
	fmt.Println(errors.Is(cause, distlock.ErrReleased), errors.Is(cause, distlock.ErrLeaseLost))
	// Output: true false
}

// Valid reads the clock when it is called, so a holder that was paused
// (GC, SIGSTOP) past its deadline learns it before writing even if the
// expiry timer has not fired yet. It is an early stop, not a guard: the
// write itself must be fenced with the lease's token.
func ExampleLease_Valid() {
	ctx := context.Background()
	locker, closePool, err := postgresLocker(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closePool()
	before := time.Now()
	lease, err := locker.Acquire(ctx, fmt.Sprintf("job-%d", rand.Uint32()), &distlock.Options{TTL: 2 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	deadline, ok := lease.Deadline()
	fmt.Println("valid:", lease.Valid())
	fmt.Println("deadline within the TTL:", ok && deadline.Before(before.Add(2*time.Second)))
	// Before each step of long work: stop if the lease is over.
	if !lease.Valid() {
		fmt.Println("stop:", context.Cause(lease.Context()))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fmt.Println("release:", lease.Release(ctx))
	fmt.Println("valid after release:", lease.Valid())
	// Output:
	// valid: true
	// deadline within the TTL: true
	// release: <nil>
	// valid after release: false
}
