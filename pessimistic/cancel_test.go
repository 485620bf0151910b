package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// eventually polls cond (an observation of server state, not a sleep used
// for ordering) every interval until it holds, failing after 10 s.
func eventually(t *testing.T, what string, interval time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(interval)
	}
}

// awaitReturn waits for the waiter's result after cancel; the holder still
// holds its lock, so a waiter that waited for the lock would never return.
func awaitReturn(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not return after cancel while the holder kept the lock")
		return nil
	}
}

// checkEnded: a lock wait ended by the caller's context is reported as
// that context's error (context.Canceled, or DeadlineExceeded for the
// caller's deadline), never as ErrLockTimeout, which means the server's
// own lock timeout.
func checkEnded(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Fatalf("err = %v, want %v and not ErrLockTimeout", err, want)
	}
}

// endings are the two ways the caller's context ends a lock wait: cancel
// (after the waiter is seen blocking) and a deadline (which expires while
// it blocks; generous enough for the waiter to start waiting first, but
// correctness does not depend on that).
type ending struct {
	name string
	want error
	ctx  func(parent context.Context) (context.Context, context.CancelFunc)
}

// end ends the wait: cancel, or let the deadline expire.
func (e ending) end(cancel context.CancelFunc) {
	if e.want == context.Canceled {
		cancel()
	}
}

var endings = []ending{
	{"Cancel", context.Canceled, context.WithCancel},
	{"Deadline", context.DeadlineExceeded, func(p context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(p, 500*time.Millisecond)
	}},
}

func TestCancelRowLockWaitPostgres(t *testing.T) {
	for _, end := range endings {
		t.Run(end.name, func(t *testing.T) {
			pool := pgPool(t, 4)
			ctx := t.Context()
			if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1)"); err != nil {
				t.Fatal(err)
			}
			holder, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(context.WithoutCancel(ctx))
			if _, err := pessimisticpg.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := end.ctx(ctx)
			defer cancel()
			pid := make(chan uint32, 1)
			done := make(chan error, 1)
			go func() {
				done <- pessimisticpg.InTx(wctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
					pid <- tx.Conn().PgConn().PID()
					_, err := pessimisticpg.LockRows(ctx, tx, "inventory", "id", []int64{1}, pessimistic.Lock{})
					return err
				})
			}()
			waiter := <-pid
			eventually(t, "the waiter to block on the row lock", 2*time.Millisecond, func() (bool, error) {
				var n int
				err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", waiter).Scan(&n)
				return n == 1 || wctx.Err() != nil, err
			})
			start := time.Now()
			end.end(cancel)
			err = awaitReturn(t, done)
			t.Logf("returned %v after the wait was ended: %v", time.Since(start), err)
			checkEnded(t, err, end.want)
		})
	}
}

func TestCancelAdvisoryLockWaitPostgres(t *testing.T) {
	for _, end := range endings {
		t.Run(end.name, func(t *testing.T) {
			pool := pgPool(t, 4)
			ctx := t.Context()
			holder, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release()
			key := pessimistic.AdvisoryKey(t.Name())
			l, err := pessimisticpg.AdvisoryLock(ctx, holder.Conn(), key)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.WithoutCancel(ctx))
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			waiter := c.Conn().PgConn().PID()
			wctx, cancel := end.ctx(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := pessimisticpg.AdvisoryLock(wctx, c.Conn(), key)
				done <- err
			}()
			eventually(t, "the waiter to block on the advisory lock", 2*time.Millisecond, func() (bool, error) {
				var n int
				err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'", waiter).Scan(&n)
				return n == 1 || wctx.Err() != nil, err
			})
			start := time.Now()
			end.end(cancel)
			err = awaitReturn(t, done)
			t.Logf("returned %v after the wait was ended: %v", time.Since(start), err)
			checkEnded(t, err, end.want)
		})
	}
}

// TestCancelAdvisoryXactLockWaitPostgres: the same for the
// transaction-level advisory lock inside InTx.
func TestCancelAdvisoryXactLockWaitPostgres(t *testing.T) {
	for _, end := range endings {
		t.Run(end.name, func(t *testing.T) {
			pool := pgPool(t, 4)
			ctx := t.Context()
			key := pessimistic.AdvisoryKey(t.Name())
			holder, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(context.WithoutCancel(ctx))
			if err := pessimisticpg.AdvisoryXactLock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := end.ctx(ctx)
			defer cancel()
			pid := make(chan uint32, 1)
			done := make(chan error, 1)
			go func() {
				done <- pessimisticpg.InTx(wctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
					pid <- tx.Conn().PgConn().PID()
					return pessimisticpg.AdvisoryXactLock(ctx, tx, key)
				})
			}()
			waiter := <-pid
			eventually(t, "the waiter to block on the advisory lock", 2*time.Millisecond, func() (bool, error) {
				var n int
				err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'advisory'", waiter).Scan(&n)
				return n == 1 || wctx.Err() != nil, err
			})
			end.end(cancel)
			checkEnded(t, awaitReturn(t, done), end.want)
		})
	}
}

func TestCancelRowLockWaitMariaDB(t *testing.T) {
	for _, end := range endings {
		t.Run(end.name, func(t *testing.T) {
			db := myDB(t, 4)
			ctx := t.Context()
			if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1)"); err != nil {
				t.Fatal(err)
			}
			holder, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			if _, err := pessimisticmysql.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := end.ctx(ctx)
			defer cancel()
			id := make(chan int64, 1)
			done := make(chan error, 1)
			go func() {
				done <- pessimisticmysql.InTx(wctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
					var n int64
					if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&n); err != nil {
						return err
					}
					id <- n
					_, err := pessimisticmysql.LockRows(ctx, tx, "inventory", "id", []int64{1}, pessimistic.Lock{})
					return err
				})
			}()
			waiter := <-id
			// The driver drops the connection on cancel; the server thread would
			// wait on until the holder ends, so end it.
			t.Cleanup(func() { _, _ = db.Exec(fmt.Sprintf("KILL %d", waiter)) })
			// InnoDB refreshes information_schema.innodb_trx only after 100 ms
			// without readers, so poll more slowly than that.
			eventually(t, "the waiter to block on the row lock", 150*time.Millisecond, func() (bool, error) {
				var n int
				err := holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", waiter).Scan(&n)
				return n == 1 || wctx.Err() != nil, err
			})
			start := time.Now()
			end.end(cancel)
			err = awaitReturn(t, done)
			t.Logf("returned %v after the wait was ended: %v", time.Since(start), err)
			checkEnded(t, err, end.want)
		})
	}
}
