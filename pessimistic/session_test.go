package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/testkit"
)

// TestInTxMySQLLockTimeoutDoesNotLeak: the session's
// innodb_lock_wait_timeout is back to its old value for the next user of
// the connection however the transaction ended — here the context ends
// while fn runs Go code, so database/sql rolls back by itself. A pool of
// one connection makes the next user get the same session.
func TestInTxMySQLLockTimeoutDoesNotLeak(t *testing.T) {
	db := myDB(t, 1)
	ctx := t.Context()
	var before int64
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before == 1 {
		t.Fatalf("server default innodb_lock_wait_timeout is 1: the test cannot tell")
	}
	endings := []struct {
		name string
		fn   func(ctx context.Context, cancel context.CancelFunc, tx *sql.Tx) error
		want error
	}{
		{"ContextEndsInFn", func(ctx context.Context, cancel context.CancelFunc, tx *sql.Tx) error {
			cancel()
			// Wait (in Go code, no statement running) until database/sql has
			// rolled the transaction back on its own.
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := tx.QueryRowContext(context.Background(), "SELECT 1").Scan(new(int))
				if errors.Is(err, sql.ErrTxDone) {
					return ctx.Err()
				}
				if time.Now().After(deadline) {
					return errors.New("database/sql did not roll back after cancel")
				}
				time.Sleep(time.Millisecond)
			}
		}, context.Canceled},
		{"Error", func(context.Context, context.CancelFunc, *sql.Tx) error { return errSoldOut }, errSoldOut},
		{"Commit", func(context.Context, context.CancelFunc, *sql.Tx) error { return nil }, nil},
		{"Panic", func(context.Context, context.CancelFunc, *sql.Tx) error { panic(errSoldOut) }, errSoldOut},
	}
	for _, tc := range endings {
		t.Run(tc.name, func(t *testing.T) {
			tctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var inside int64
			err := inTxRecover(tctx, db, &pessimistic.Options{LockTimeout: time.Second}, func(ctx context.Context, tx *sql.Tx) error {
				if err := tx.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&inside); err != nil {
					return err
				}
				return tc.fn(ctx, cancel, tx)
			})
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("InTxMySQL = %v, want %v", err, tc.want)
			}
			if inside != 1 {
				t.Fatalf("innodb_lock_wait_timeout inside = %d, want 1", inside)
			}
			var after int64
			if err := db.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("the pool's next user has innodb_lock_wait_timeout = %d, was %d", after, before)
			}
		})
	}
}

// inTxRecover is InTxMySQL, with a panic of fn (re-raised by InTxMySQL
// after its rollback) returned as an error.
func inTxRecover(ctx context.Context, db pessimistic.SQLBeginner, opts *pessimistic.Options, fn func(context.Context, *sql.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = p.(error)
		}
	}()
	return pessimistic.InTxMySQL(ctx, db, opts, fn)
}

// advisoryLocks returns how many advisory locks the session of q holds.
func advisoryLocks(t *testing.T, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) int {
	t.Helper()
	var n int
	if err := q.QueryRow(t.Context(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSessionLockReleaseCancelledContext: Release with an already
// cancelled context still unlocks, so neither the pool's next borrower of
// the connection (pool of one) holds the lock re-entrantly nor does
// another session find it taken; a second Release repeats the result.
func TestSessionLockReleaseCancelledContext(t *testing.T) {
	pool := pgPool(t, 1)
	ctx := t.Context()
	key := pessimistic.AdvisoryKey(t.Name())
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pessimistic.AdvisoryLock(ctx, c.Conn(), key)
	if err != nil {
		c.Release()
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	first := l.Release(cancelled)
	second := l.Release(ctx)
	c.Release()
	if first != nil || second != nil {
		t.Fatalf("Release(cancelled) = %v, then %v; want nil, nil", first, second)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("the pool's next borrower holds %d advisory locks", n)
	}
	other := testkit.PostgresConn(t, testkit.PostgresServerURL(t))
	lo, err := pessimistic.TryAdvisoryLock(ctx, other, key)
	if err != nil {
		t.Fatalf("another session after Release(cancelled): %v", err)
	}
	if err := lo.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSessionLockReleaseUnconfirmed: when the server cannot confirm the
// unlock (here: the session is in a failed transaction, so every
// statement is refused), Release closes the connection, which frees the
// lock, and says so; the pool destroys the closed connection.
func TestSessionLockReleaseUnconfirmed(t *testing.T) {
	pool := pgPool(t, 1)
	ctx := t.Context()
	key := pessimistic.AdvisoryKey(t.Name())
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pessimistic.AdvisoryLock(ctx, c.Conn(), key)
	if err != nil {
		c.Release()
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("division by zero succeeded")
	}
	err = l.Release(ctx)
	closed := c.Conn().IsClosed()
	c.Release()
	if err == nil || errors.Is(err, pessimistic.ErrNotHeld) || !closed {
		t.Fatalf("Release in a failed transaction = %v (connection closed: %v), want an error and a closed connection", err, closed)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("the pool's next borrower holds %d advisory locks", n)
	}
	other := testkit.PostgresConn(t, testkit.PostgresServerURL(t))
	// The server ends the closed session asynchronously.
	eventually(t, "the closed session's lock to be freed", 5*time.Millisecond, func() (bool, error) {
		lo, err := pessimistic.TryAdvisoryLock(ctx, other, key)
		if errors.Is(err, pessimistic.ErrLockNotAvailable) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, lo.Release(ctx)
	})
}
