package pessimisticpg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// count returns the number of counters rows with id, as seen by q.
func count(t *testing.T, q pessimisticpg.DBTX, id int64) int {
	t.Helper()
	var n int
	if err := q.QueryRow(t.Context(), "SELECT count(*) FROM counters WHERE id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInTxCallerTransaction: given a pgx.Tx the caller opened, InTx runs
// fn once inside a savepoint: it neither commits nor retries; a failure
// (an error, a failed statement, a panic) rolls back fn's work only, and
// the caller's transaction goes on; success leaves fn's work to the
// caller's COMMIT.
func TestInTxCallerTransaction(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	outer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Rollback(context.WithoutCancel(ctx))
	if _, err := outer.Exec(ctx, "INSERT INTO counters (id) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	insert := func(id int64) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO counters (id) VALUES ($1)", id)
			return err
		}
	}

	// Success: fn's row is in the caller's transaction, not committed.
	if err := pessimisticpg.InTx(ctx, outer, nil, insert(2)); err != nil {
		t.Fatal(err)
	}
	if count(t, outer, 2) != 1 || count(t, pool, 2) != 0 {
		t.Fatal("fn's write: want visible in the caller's transaction and not committed")
	}

	// A retryable error: fn runs once, the error comes back unchanged for
	// the caller's loop, fn's write is rolled back to the savepoint.
	for _, retryable := range []error{optimistic.ErrConflict, pessimistic.ErrDeadlock} {
		calls := 0
		err := pessimisticpg.InTx(ctx, outer, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 5}}, func(ctx context.Context, tx pgx.Tx) error {
			calls++
			if err := insert(3)(ctx, tx); err != nil {
				return err
			}
			return retryable
		})
		if !errors.Is(err, retryable) || calls != 1 {
			t.Fatalf("err = %v after %d calls; want %v after 1 (no retry in a caller's transaction)", err, calls, retryable)
		}
		if count(t, outer, 3) != 0 {
			t.Fatal("fn's write survived its failure")
		}
	}

	// A failed statement (duplicate key) would abort the caller's
	// transaction; in the savepoint it does not.
	err = pessimisticpg.InTx(ctx, outer, nil, insert(1))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("duplicate insert = %v, want 23505", err)
	}

	// A panic rolls back to the savepoint and is re-raised.
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want boom", p)
			}
		}()
		_ = pessimisticpg.InTx(ctx, outer, nil, func(ctx context.Context, tx pgx.Tx) error {
			if err := insert(4)(ctx, tx); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if count(t, outer, 4) != 0 {
		t.Fatal("the panicking fn's write survived")
	}

	// LockTimeout applies inside fn only.
	var inside, after string
	err = pessimisticpg.InTx(ctx, outer, &pessimistic.Options{LockTimeout: 1500 * time.Millisecond}, func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&inside)
	})
	if err != nil || inside != "1500ms" {
		t.Fatalf("lock_timeout inside = %q, %v", inside, err)
	}
	if err := outer.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&after); err != nil || after != "0" {
		t.Fatalf("lock_timeout after = %q, %v; want the caller's 0", after, err)
	}

	// The caller's transaction is healthy and commits everything that
	// succeeded.
	if err := outer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]int{1: 1, 2: 1, 3: 0, 4: 0} {
		if got := count(t, pool, id); got != want {
			t.Errorf("row %d: %d, want %d", id, got, want)
		}
	}
}

// TestInTxNested: the caller's transaction can be an outer InTx's; a
// conflict inside the nested InTx retries the outer one as a whole.
func TestInTxNested(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := t.Context()
	outerCalls, innerCalls := 0, 0
	err := pessimisticpg.InTx(ctx, pool, &pessimistic.Options{Retry: retry.Policy{BaseDelay: time.Millisecond}}, func(ctx context.Context, tx pgx.Tx) error {
		outerCalls++
		if _, err := tx.Exec(ctx, "INSERT INTO counters (id) VALUES (1)"); err != nil {
			return err
		}
		return pessimisticpg.InTx(ctx, tx, nil, func(ctx context.Context, tx pgx.Tx) error {
			innerCalls++
			if innerCalls == 1 {
				return optimistic.ErrConflict
			}
			_, err := tx.Exec(ctx, "INSERT INTO counters (id) VALUES (2)")
			return err
		})
	})
	if err != nil || outerCalls != 2 || innerCalls != 2 {
		t.Fatalf("err = %v, outer ran %d times, inner %d; want nil, 2, 2", err, outerCalls, innerCalls)
	}
	if count(t, pool, 1) != 1 || count(t, pool, 2) != 1 {
		t.Fatal("the retried transaction did not commit both rows once")
	}
}

// TestInTxRetriesConflict: owning the transaction, InTx runs it again on
// optimistic.ErrConflict (by default), and InTxValue returns the value of
// the attempt that committed.
func TestInTxRetriesConflict(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := t.Context()
	calls := 0
	v, err := pessimisticpg.InTxValue(ctx, pool, &pessimistic.Options{Retry: retry.Policy{BaseDelay: time.Millisecond}}, func(ctx context.Context, tx pgx.Tx) (int, error) {
		calls++
		if _, err := tx.Exec(ctx, "INSERT INTO counters (id, value) VALUES (1, $1)", calls); err != nil {
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
	if err := pool.QueryRow(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&value); err != nil || value != 3 {
		t.Fatalf("committed value %d, %v; want the third attempt's 3", value, err)
	}

	// Exhausted: the zero value and the error.
	v, err = pessimisticpg.InTxValue(ctx, pool, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}, func(context.Context, pgx.Tx) (int, error) {
		return 7, optimistic.ErrConflict
	})
	if v != 0 || !errors.Is(err, retry.ErrExhausted) || !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("InTxValue = %d, %v; want 0 and an exhausted ErrConflict", v, err)
	}
}
