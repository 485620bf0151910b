package pessimisticmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
)

// TestInTxLockTimeoutDoesNotLeak: the session's
// innodb_lock_wait_timeout is back to its old value for the next user of
// the connection however the transaction ended — here the context ends
// while fn runs Go code, so database/sql rolls back by itself. A pool of
// one connection makes the next user get the same session.
func TestInTxLockTimeoutDoesNotLeak(t *testing.T) {
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
				t.Fatalf("InTx = %v, want %v", err, tc.want)
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

// inTxRecover is InTx, with a panic of fn (re-raised by InTx
// after its rollback) returned as an error.
func inTxRecover(ctx context.Context, db pessimisticmysql.DBTX, opts *pessimistic.Options, fn func(context.Context, *sql.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = p.(error)
		}
	}()
	return pessimisticmysql.InTx(ctx, db, opts, fn)
}
