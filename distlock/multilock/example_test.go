package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/multilock"
	"github.com/concurkit/concurkit/distlock/pglock"
)

// postgresURL is the test PostgreSQL (CONCURKIT_POSTGRES_URL or the
// scripts' default port).
func postgresURL() string {
	if url := os.Getenv("CONCURKIT_POSTGRES_URL"); url != "" {
		return url
	}
	return "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
}

// postgresLocker returns a pglock Locker on a pool of its own, as another
// process would have, and a function that closes both.
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
	return l, func() {
		_ = l.Close(context.Background())
		pool.Close()
	}, nil
}

// Two transfers between the same accounts, in opposite directions, run at
// once on two instances: each locks both accounts, naming them in its own
// order. Taken one by one in that order, each could hold its source
// account and wait forever for the other's; multilock takes both in the
// same (sorted) order, so one transfer waits for the other's whole set.
// Each write to an account would be fenced with that account's token.
func Example() {
	ctx := context.Background()
	run := fmt.Sprintf("example-%d", rand.Uint32())
	// The balances stand for rows of a database; atomics only so that the
	// race detector, which does not see the locks on the server, is quiet.
	balance := map[string]*atomic.Int64{"account/1": {}, "account/2": {}}
	balance["account/1"].Store(100)
	balance["account/2"].Store(100)
	transfer := func(from, to string, amount int64) error {
		locker, closeLocker, err := postgresLocker(ctx)
		if err != nil {
			return err
		}
		defer closeLocker()
		set, err := multilock.Acquire(ctx, locker, []string{run + "/" + from, run + "/" + to}, &distlock.Options{TTL: 10 * time.Second})
		if err != nil {
			return err // nothing is held
		}
		defer set.Release(ctx)
		if !set.Token(run + "/" + from).Valid() {
			return errors.New("no token")
		}
		// Under both locks: storage would check set.Token(run+"/"+from)
		// for the debit and set.Token(run+"/"+to) for the credit.
		balance[from].Store(balance[from].Load() - amount)
		balance[to].Store(balance[to].Load() + amount)
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { errs[0] = transfer("account/1", "account/2", 30) })
	wg.Go(func() { errs[1] = transfer("account/2", "account/1", 10) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Println(err) // a missing server fails this example only
		return
	}
	fmt.Println("account/1:", balance["account/1"].Load(), "account/2:", balance["account/2"].Load())
	// Output:
	// account/1: 80 account/2: 120
}

// TryAcquire never waits: with one key of the set held elsewhere it fails
// at once with distlock.ErrNotAcquired, and the keys it took before that
// one are released again.
func ExampleTryAcquire() {
	ctx := context.Background()
	locker, closeLocker, err := postgresLocker(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeLocker()
	run := fmt.Sprintf("example-%d", rand.Uint32())
	a, b := run+"/a", run+"/b"

	other, err := locker.TryAcquire(ctx, b, nil) // another holder has b
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = multilock.TryAcquire(ctx, locker, []string{a, b}, nil)
	fmt.Println("set while b is held:", errors.Is(err, distlock.ErrNotAcquired))
	lease, err := locker.TryAcquire(ctx, a, nil)
	fmt.Println("a free again:", err == nil)
	if err == nil {
		_ = lease.Release(ctx)
	}
	_ = other.Release(ctx)

	set, err := multilock.TryAcquire(ctx, locker, []string{b, a, b}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer set.Release(ctx)
	fmt.Println("keys:", len(set.Keys()), "sorted:", set.Keys()[0] == a)
	fmt.Println("a token per key:", set.Token(a).Valid() && set.Token(b).Valid() && set.Token(a) != set.Token(b))
	// Output:
	// set while b is held: true
	// a free again: true
	// keys: 2 sorted: true
	// a token per key: true
}
