package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// crossing makes two transactions lock rows 1 and 2 in opposite order: on
// their first attempt each locks its first row, announces it, waits for the
// other's announcement, then locks its second row — a guaranteed deadlock.
// Later attempts (retries) skip the barrier.
type crossing struct {
	locked [2]chan struct{}
	once   [2]sync.Once
	first  [2]atomic.Bool
}

func newCrossing() *crossing {
	c := &crossing{locked: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
	c.first[0].Store(true)
	c.first[1].Store(true)
	return c
}

// between is called by transaction i after it locked its first row.
func (c *crossing) between(ctx context.Context, i int) error {
	if !c.first[i].Swap(false) {
		return nil
	}
	c.once[i].Do(func() { close(c.locked[i]) })
	select {
	case <-c.locked[1-i]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// order[i] is the row order of transaction i; delta[i] what it adds.
var (
	order = [2][2]int64{{1, 2}, {2, 1}}
	delta = [2]int64{1, 10}
)

func TestDeadlockPostgres(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry retry.Policy
	}{
		{"NoRetry", retry.Policy{MaxAttempts: 1}},
		{"Retry", retry.Policy{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := pgPool(t, 4)
			ctx := t.Context()
			if _, err := pool.Exec(ctx, "INSERT INTO counters (id, value) VALUES (1, 0), (2, 0)"); err != nil {
				t.Fatal(err)
			}
			c := newCrossing()
			var retried [2]error
			var errs [2]error
			var wg sync.WaitGroup
			for i := range 2 {
				opts := &pessimistic.Options{Retry: tc.retry}
				ctx := recordRetry(ctx, &retried[i])
				wg.Go(func() {
					errs[i] = pessimisticpg.InTx(ctx, pool, opts, func(ctx context.Context, tx pgx.Tx) error {
						// deadlock_timeout is superuser-settable; lower it so the check runs soon.
						if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '20ms'"); err != nil {
							return err
						}
						for step, id := range order[i] {
							if _, err := pessimisticpg.LockRows(ctx, tx, "counters", "id", []int64{id}, pessimistic.Lock{}); err != nil {
								return err
							}
							if _, err := tx.Exec(ctx, "UPDATE counters SET value = value + $1 WHERE id = $2", delta[i], id); err != nil {
								return err
							}
							if step == 0 {
								if err := c.between(ctx, i); err != nil {
									return err
								}
							}
						}
						return nil
					})
				})
			}
			wg.Wait()
			var v1, v2 int64
			if err := pool.QueryRow(ctx, "SELECT (SELECT value FROM counters WHERE id = 1), (SELECT value FROM counters WHERE id = 2)").Scan(&v1, &v2); err != nil {
				t.Fatal(err)
			}
			checkDeadlock(t, tc.name == "Retry", errs, retried, v1, v2, func(err error) bool {
				var pgErr *pgconn.PgError
				return errors.As(err, &pgErr) && pgErr.Code == "40P01"
			})
		})
	}
}

func TestDeadlockMariaDB(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry retry.Policy
	}{
		{"NoRetry", retry.Policy{MaxAttempts: 1}},
		{"Retry", retry.Policy{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := myDB(t, 4)
			ctx := t.Context()
			if _, err := db.ExecContext(ctx, "INSERT INTO counters (id, value) VALUES (1, 0), (2, 0)"); err != nil {
				t.Fatal(err)
			}
			c := newCrossing()
			var retried [2]error
			var errs [2]error
			var wg sync.WaitGroup
			for i := range 2 {
				opts := &pessimistic.Options{Retry: tc.retry}
				ctx := recordRetry(ctx, &retried[i])
				wg.Go(func() {
					errs[i] = pessimisticmysql.InTx(ctx, db, opts, func(ctx context.Context, tx *sql.Tx) error {
						for step, id := range order[i] {
							if _, err := pessimisticmysql.LockRows(ctx, tx, "counters", "id", []int64{id}, pessimistic.Lock{}); err != nil {
								return err
							}
							if _, err := tx.ExecContext(ctx, "UPDATE counters SET value = value + ? WHERE id = ?", delta[i], id); err != nil {
								return err
							}
							if step == 0 {
								if err := c.between(ctx, i); err != nil {
									return err
								}
							}
						}
						return nil
					})
				})
			}
			wg.Wait()
			var v1, v2 int64
			if err := db.QueryRowContext(ctx, "SELECT (SELECT value FROM counters WHERE id = 1), (SELECT value FROM counters WHERE id = 2)").Scan(&v1, &v2); err != nil {
				t.Fatal(err)
			}
			checkDeadlock(t, tc.name == "Retry", errs, retried, v1, v2, func(err error) bool {
				var myErr *mysql.MySQLError
				return errors.As(err, &myErr) && myErr.Number == 1213
			})
		})
	}
}

// checkDeadlock asserts the outcome of the crossing transactions: without
// retry exactly one fails with ErrDeadlock (driver error in the chain) and
// only the survivor's deltas are applied; with retry both commit and both
// deltas are applied, after exactly one deadlock.
func checkDeadlock(t *testing.T, retried bool, errs [2]error, onRetry [2]error, v1, v2 int64, isDriverDeadlock func(error) bool) {
	t.Helper()
	t.Logf("errors %v; retried after %v; rows %d, %d", errs, onRetry, v1, v2)
	if !retried {
		victim := -1
		for i, err := range errs {
			if err != nil {
				if victim >= 0 {
					t.Fatalf("both failed: %v", errs)
				}
				victim = i
			}
		}
		if victim < 0 {
			t.Fatal("no deadlock victim")
		}
		err := errs[victim]
		if !errors.Is(err, pessimistic.ErrDeadlock) || !isDriverDeadlock(err) || !retry.IsRetryable(err) {
			t.Errorf("victim error %v: want ErrDeadlock wrapping the driver's deadlock error, retryable", err)
		}
		if want := delta[1-victim]; v1 != want || v2 != want {
			t.Errorf("rows = %d, %d, want %d, %d (survivor only)", v1, v2, want, want)
		}
		return
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v, want both committed", errs)
	}
	deadlocks := 0
	for _, err := range onRetry {
		if err != nil {
			if !errors.Is(err, pessimistic.ErrDeadlock) {
				t.Errorf("retried after %v, want ErrDeadlock", err)
			}
			deadlocks++
		}
	}
	// One victim at least. Both may have retried: the victim's retry takes
	// its locks in the same crossing order, and on a loaded machine it can
	// lock its first row again before the survivor, woken by the victim's
	// rollback, takes it — a second, real deadlock. Every retry must
	// follow a deadlock and each delta must land once (below).
	if deadlocks == 0 {
		t.Error("no transaction retried, want the deadlock victim to")
	}
	if want := delta[0] + delta[1]; v1 != want || v2 != want {
		t.Errorf("rows = %d, %d, want %d, %d", v1, v2, want, want)
	}
}

// recordRetry returns ctx with observe hooks that store the error of each
// retried attempt in *last.
func recordRetry(ctx context.Context, last *error) context.Context {
	return observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			*last = e.Err
		}
	}})
}
