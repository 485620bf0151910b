package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/retry"
)

// TestRetriesAreCounted: retries of the library's retry loop reach the
// recorder through the observe hooks on the operation's context, and a
// give-up event is not counted twice.
func TestRetriesAreCounted(t *testing.T) {
	rec := &recorder{}
	pol := observedPolicy(rec)
	pol.BaseDelay, pol.MaxAttempts = 1, 3
	ctx := observe.WithHooks(t.Context(), retryHooks(rec))
	err := retry.Do(ctx, pol, func(context.Context) error { return optimistic.ErrConflict })
	if !errors.Is(err, retry.ErrExhausted) {
		t.Fatalf("retry.Do = %v", err)
	}
	rec.gaveUp(err)
	if rec.retries != 2 || rec.aborts[classConflict] != 3 {
		t.Errorf("retry.Do: %d retries, %d conflict aborts; want 2 and 3", rec.retries, rec.aborts[classConflict])
	}
	rec2 := &recorder{}
	h := retryHooks(rec2)
	h.OnRetry(t.Context(), retryEvent(pessimistic.ErrDeadlock, false))
	h.OnRetry(t.Context(), retryEvent(pessimistic.ErrDeadlock, true))
	if rec2.retries != 1 || rec2.aborts[classDeadlock] != 1 {
		t.Errorf("hooks: %d retries, %d deadlock aborts; want 1 and 1", rec2.retries, rec2.aborts[classDeadlock])
	}
}

func TestFinalOutcomes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{&retry.ExhaustedError{Attempts: 10, Last: optimistic.ErrConflict}, finalGaveUp},
		{fmt.Errorf("x: %w", pessimistic.ErrLockNotAvailable), finalFailed},
		{errors.New("connection reset"), finalUnknown},
		{errors.Join(pessimistic.ErrLockTimeout, context.DeadlineExceeded), finalUnknown},
		// Galera: an autocommit statement that failed certification; the
		// server rolled it back.
		{fmt.Errorf("optimistic: update: %w", &mysql.MySQLError{Number: 1213}), finalFailed},
		{&mysql.MySQLError{Number: 1020}, finalFailed},
	} {
		if got := final(c.err); got != c.want {
			t.Errorf("final(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// TestRawMySQLConflictsAreRetried: the strategies' policy retries a
// MySQL/MariaDB 1213 or 1020 a helper returned in the driver's form (a
// Galera certification failure of an autocommit statement) as it does the
// mapped sentinels, and counts it as a deadlock or serialization abort;
// a lock wait timeout stays final.
func TestRawMySQLConflictsAreRetried(t *testing.T) {
	for _, c := range []struct {
		err       error
		retryable bool
		class     int
	}{
		{&mysql.MySQLError{Number: 1213}, true, classDeadlock},
		{fmt.Errorf("hotrow: add: %w", &mysql.MySQLError{Number: 1213}), true, classDeadlock},
		{&mysql.MySQLError{Number: 1020}, true, classSerialization},
		{pessimistic.ErrDeadlock, true, classDeadlock},
		{&mysql.MySQLError{Number: 1205}, false, classOther},
		{errors.New("boom"), false, classOther},
	} {
		if got := observedPolicy(nil).Retryable(c.err); got != c.retryable {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.retryable)
		}
		if got := lockPolicy(nil).Retryable(c.err); got != c.retryable {
			t.Errorf("lockPolicy Retryable(%v) = %v, want %v", c.err, got, c.retryable)
		}
		if got := classify(c.err); got != c.class {
			t.Errorf("classify(%v) = %s, want %s", c.err, classNames[got], classNames[c.class])
		}
	}
	// Retried through retry.Do and counted by the hooks.
	rec := &recorder{}
	pol := observedPolicy(rec)
	pol.BaseDelay = 1
	ctx := observe.WithHooks(t.Context(), retryHooks(rec))
	n := 0
	err := retry.Do(ctx, pol, func(context.Context) error {
		if n++; n < 3 {
			return &mysql.MySQLError{Number: 1213}
		}
		return nil
	})
	if err != nil || rec.retries != 2 || rec.aborts[classDeadlock] != 2 {
		t.Errorf("retry.Do = %v after %d retries, %d deadlock aborts; want nil, 2, 2", err, rec.retries, rec.aborts[classDeadlock])
	}
}

func retryEvent(err error, gaveUp bool) observe.RetryEvent {
	return observe.RetryEvent{Err: err, GaveUp: gaveUp}
}
