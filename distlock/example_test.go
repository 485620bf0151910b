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
	"github.com/concurkit/concurkit/distlock/postgres"
)

// runExclusive is backend-neutral: it works with any distlock.Locker.
// The work gets the lease's context, which ends when the lease is lost or
// expires, and the fencing token to hand to storage (package fenced).
func runExclusive(ctx context.Context, l distlock.Locker, key string, work func(ctx context.Context, lease distlock.Lease) error) error {
	lease, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second, AutoExtend: true})
	if err != nil {
		return err
	}
	// Release with a context that outlives a cancelled caller.
	defer lease.Release(context.WithoutCancel(ctx))
	return work(lease.Context(), lease)
}

func ExampleLocker() {
	ctx := context.Background()
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err) // examples only
	}
	defer pool.Close()
	var locker distlock.Locker
	locker, err = postgres.New(pool, nil)
	if err != nil {
		panic(err)
	}
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
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	locker, err := postgres.New(pool, nil)
	if err != nil {
		panic(err)
	}
	lease, err := locker.Acquire(ctx, fmt.Sprintf("job-%d", rand.Uint32()), nil)
	if err != nil {
		panic(err)
	}
	_ = lease.Release(ctx)
	<-lease.Context().Done()
	cause := context.Cause(lease.Context())
	fmt.Println(errors.Is(cause, distlock.ErrReleased), errors.Is(cause, distlock.ErrLeaseLost))
	// Output: true false
}
