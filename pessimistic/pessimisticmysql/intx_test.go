package pessimisticmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

func count(t *testing.T, q pessimisticmysql.DBTX, id int64) int {
	t.Helper()
	var n int
	if err := q.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM counters WHERE id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInTxCallerTransaction: given a *sql.Tx the caller opened, InTx runs
// fn once inside it — same session, no commit, no retry, no rollback — and
// returns fn's error (mapped) for the caller's loop; a panic propagates.
func TestInTxCallerTransaction(t *testing.T) {
	db := myDB(t, 4)
	ctx := t.Context()
	outer, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Rollback()
	var outerID, innerID int64
	if err := outer.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&outerID); err != nil {
		t.Fatal(err)
	}
	err = pessimisticmysql.InTx(ctx, outer, nil, func(ctx context.Context, tx *sql.Tx) error {
		if tx != outer {
			t.Error("fn got another transaction")
		}
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&innerID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO counters (id) VALUES (1)")
		return err
	})
	if err != nil || innerID != outerID {
		t.Fatalf("err = %v, session %d in fn, %d outside", err, innerID, outerID)
	}
	if count(t, outer, 1) != 1 || count(t, db, 1) != 0 {
		t.Fatal("fn's write: want visible in the caller's transaction and not committed")
	}

	for _, retryable := range []error{optimistic.ErrConflict, pessimistic.ErrDeadlock} {
		calls := 0
		err := pessimisticmysql.InTx(ctx, outer, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 5}}, func(context.Context, *sql.Tx) error {
			calls++
			return retryable
		})
		if !errors.Is(err, retryable) || calls != 1 {
			t.Fatalf("err = %v after %d calls; want %v after 1 (no retry in a caller's transaction)", err, calls, retryable)
		}
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want boom", p)
			}
		}()
		_ = pessimisticmysql.InTx(ctx, outer, nil, func(context.Context, *sql.Tx) error { panic("boom") })
	}()

	// InTx did not end the caller's transaction: it commits fn's write.
	if err := outer.Commit(); err != nil {
		t.Fatal(err)
	}
	if count(t, db, 1) != 1 {
		t.Fatal("fn's write lost")
	}
}

// TestInTxNested: a conflict inside a nested InTx retries the outer one as
// a whole.
func TestInTxNested(t *testing.T) {
	db := myDB(t, 2)
	ctx := t.Context()
	outerCalls, innerCalls := 0, 0
	err := pessimisticmysql.InTx(ctx, db, &pessimistic.Options{Retry: retry.Policy{BaseDelay: time.Millisecond}}, func(ctx context.Context, tx *sql.Tx) error {
		outerCalls++
		if _, err := tx.ExecContext(ctx, "INSERT INTO counters (id) VALUES (1)"); err != nil {
			return err
		}
		return pessimisticmysql.InTx(ctx, tx, nil, func(ctx context.Context, tx *sql.Tx) error {
			innerCalls++
			if innerCalls == 1 {
				return optimistic.ErrConflict
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO counters (id) VALUES (2)")
			return err
		})
	})
	if err != nil || outerCalls != 2 || innerCalls != 2 {
		t.Fatalf("err = %v, outer ran %d times, inner %d; want nil, 2, 2", err, outerCalls, innerCalls)
	}
	if count(t, db, 1) != 1 || count(t, db, 2) != 1 {
		t.Fatal("the retried transaction did not commit both rows once")
	}
}

// TestInTxRetriesConflict: owning the transaction, InTx runs it again on
// optimistic.ErrConflict (by default), and InTxValue returns the value of
// the attempt that committed, or the zero value with an error.
func TestInTxRetriesConflict(t *testing.T) {
	db := myDB(t, 2)
	ctx := t.Context()
	calls := 0
	v, err := pessimisticmysql.InTxValue(ctx, db, &pessimistic.Options{Retry: retry.Policy{BaseDelay: time.Millisecond}}, func(ctx context.Context, tx *sql.Tx) (int, error) {
		calls++
		if _, err := tx.ExecContext(ctx, "INSERT INTO counters (id, value) VALUES (1, ?)", calls); err != nil {
			return 0, err
		}
		if calls < 3 {
			return calls, optimistic.ErrConflict
		}
		return calls * 10, nil
	})
	if err != nil || calls != 3 || v != 30 {
		t.Fatalf("InTxValue = %d, %v after %d calls; want 30, nil after 3", v, err, calls)
	}
	var value int
	if err := db.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&value); err != nil || value != 3 {
		t.Fatalf("committed value %d, %v; want the third attempt's 3", value, err)
	}
	v, err = pessimisticmysql.InTxValue(ctx, db, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}, func(context.Context, *sql.Tx) (int, error) {
		return 7, optimistic.ErrConflict
	})
	if v != 0 || !errors.Is(err, retry.ErrExhausted) || !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("InTxValue = %d, %v; want 0 and an exhausted ErrConflict", v, err)
	}
}
