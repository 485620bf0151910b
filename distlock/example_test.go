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
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/observe"
)

// postgresURL is the test PostgreSQL (CONCURKIT_POSTGRES_URL or the
// scripts' default port).
func postgresURL() string {
	if url := os.Getenv("CONCURKIT_POSTGRES_URL"); url != "" {
		return url
	}
	return "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
}

// postgresLocker connects to the test PostgreSQL.
func postgresLocker(ctx context.Context) (distlock.Locker, func(), error) {
	pool, err := pgxpool.New(ctx, postgresURL())
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
	// The work gets the lease's context, which ends when the lease is lost
	// or expires, and the fencing token to hand to storage (package fenced).
	err = distlock.Do(ctx, locker, key, &distlock.Options{TTL: 5 * time.Second, AutoExtend: true}, func(ctx context.Context, lease distlock.Lease) error {
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
	lease, err := locker.Acquire(ctx, fmt.Sprintf("job-%d", rand.Uint32()), &distlock.Options{TTL: 2 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The deadline counts from when the lock request was sent (minus a
	// margin for clock drift), so it is less than the TTL from now.
	deadline, ok := lease.Deadline()
	fmt.Println("valid:", lease.Valid())
	fmt.Println("deadline within the TTL:", ok && deadline.Before(time.Now().Add(2*time.Second)))
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

// Do is the one call for "hold a lease, write fenced and versioned": it
// acquires, runs the work with a context that ends with the lease, and
// always releases. The write carries the lease's token, so storage refuses
// it if a newer holder has written since (a holder paused past its lease),
// and it bumps the version column, so optimistic compare-and-swap writers
// of the same rows see it.
func ExampleDo() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, postgresURL())
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
	table := fmt.Sprintf("example_accounts_%d", rand.Uint32())
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, balance bigint NOT NULL,
		version bigint NOT NULL DEFAULT 1, max_seen_token bigint NOT NULL DEFAULT 0)`, table)); err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Exec(ctx, "DROP TABLE "+table)
	if _, err := pool.Exec(ctx, "INSERT INTO "+table+" (id, balance) VALUES (1, 100)"); err != nil {
		fmt.Println(err)
		return
	}

	err = distlock.Do(ctx, locker, "interest-run", &distlock.Options{TTL: 10 * time.Second, AutoExtend: true},
		func(ctx context.Context, lease distlock.Lease) error {
			accounts := fenced.Table{Name: table, VersionColumn: "version"}
			return fencedpg.Update(ctx, pool, accounts, 1, lease.Token(), map[string]any{"balance": 105})
		})
	fmt.Println("done:", err)
	var balance, version int64
	if err := pool.QueryRow(ctx, "SELECT balance, version FROM "+table+" WHERE id = 1").Scan(&balance, &version); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("balance:", balance, "version:", version)
	// Output:
	// done: <nil>
	// balance: 105 version: 2
}

// DoValue returns what the work computed, here the token it wrote with.
func ExampleDoValue() {
	ctx := context.Background()
	locker, closePool, err := postgresLocker(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closePool()
	token, err := distlock.DoValue(ctx, locker, fmt.Sprintf("report-%d", rand.Uint32()), nil,
		func(ctx context.Context, lease distlock.Lease) (fenced.Token, error) {
			return lease.Token(), nil // ... the work, written with lease.Token()
		})
	fmt.Println(token.Valid(), err)
	// Output: true <nil>
}

// Hooks on the Acquire context observe the lock: here an Acquire that
// waited for a held lock until its deadline.
func ExampleLocker_hooks() {
	ctx := context.Background()
	locker, closePool, err := postgresLocker(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closePool()
	key := fmt.Sprintf("report-%d", rand.Uint32())
	held, err := locker.Acquire(ctx, key, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Release(ctx)

	hooks := &observe.Hooks{
		LockWait: func(_ context.Context, e observe.LockWaitEvent) {
			fmt.Println("waited:", e.Package, e.Wait > 0, observe.ErrorType(e.Err))
		},
	}
	wctx, cancel := context.WithTimeout(observe.WithHooks(ctx, hooks), time.Second)
	defer cancel()
	_, err = locker.Acquire(wctx, key, nil)
	fmt.Println(errors.Is(err, distlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// waited: pglock true not_acquired
	// true true
}

// A job loop that retries on failure must not redo work that completed:
// Do returns a *CompletedError when fn returned nil but the lease was lost
// meanwhile or the release was unconfirmed.
func ExampleCompletedError() {
	next := func(err error) string {
		var done *distlock.CompletedError
		switch {
		case err == nil:
			return "done"
		case errors.As(err, &done):
			return fmt.Sprintf("done (then: lease lost %v)", errors.Is(err, distlock.ErrLeaseLost))
		default:
			return "retry"
		}
	}
	fmt.Println(next(nil))
	fmt.Println(next(&distlock.CompletedError{Err: fmt.Errorf("%w: validity expired", distlock.ErrLeaseLost)}))
	fmt.Println(next(errors.Join(errors.New("charge failed"), distlock.ErrLeaseLost)))
	fmt.Println(next(errors.Join(distlock.ErrNotAcquired, context.DeadlineExceeded)))
	// Output:
	// done
	// done (then: lease lost true)
	// retry
	// retry
}
