package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
	} {
		if got := final(c.err); got != c.want {
			t.Errorf("final(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func retryEvent(err error, gaveUp bool) observe.RetryEvent {
	return observe.RetryEvent{Err: err, GaveUp: gaveUp}
}
