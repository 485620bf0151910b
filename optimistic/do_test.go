package optimistic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/retry"
)

// TestDoExhaustedAndCancelled: a CAS that can never succeed (a version the
// row will never have) is retried MaxAttempts times and ends in
// *retry.ExhaustedError that still matches ErrConflict; a context cancelled
// during the backoff ends the loop with an error matching both
// context.Canceled and ErrConflict; a non-retryable error stops at once.
func TestDoExhaustedAndCancelled(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "counters", "value")
			s.insert(t, 1, 0)
			stale := func(ctx context.Context) error {
				_, err := s.update(ctx, int64(1), 99, map[string]any{"value": 1})
				return err
			}

			calls := 0
			err := optimistic.Do(t.Context(), retry.Policy{MaxAttempts: 3, BaseDelay: time.Microsecond}, func(ctx context.Context) error {
				calls++
				return stale(ctx)
			})
			var ex *retry.ExhaustedError
			if !errors.As(err, &ex) || ex.Attempts != 3 || calls != 3 || !errors.Is(err, optimistic.ErrConflict) || !errors.Is(err, retry.ErrExhausted) {
				t.Fatalf("exhausted: err=%v calls=%d; want *retry.ExhaustedError{Attempts: 3} matching ErrConflict", err, calls)
			}

			ctx, cancel := context.WithCancel(t.Context())
			ctx = observe.WithHooks(ctx, &observe.Hooks{Retry: func(context.Context, observe.RetryEvent) { cancel() }})
			err = optimistic.Do(ctx, retry.Policy{MaxAttempts: 100, BaseDelay: time.Hour, MaxDelay: time.Hour}, stale)
			if !errors.Is(err, context.Canceled) || !errors.Is(err, optimistic.ErrConflict) {
				t.Fatalf("cancelled: %v; want context.Canceled joined with ErrConflict", err)
			}

			calls = 0
			v, err := optimistic.DoValue(t.Context(), retry.Policy{}, func(ctx context.Context) (int64, error) {
				calls++
				return s.update(ctx, int64(404), 1, nil)
			})
			if !errors.Is(err, optimistic.ErrNotFound) || calls != 1 || v != 0 {
				t.Fatalf("not found: v=%d err=%v calls=%d; want ErrNotFound after 1 call", v, err, calls)
			}
		})
	}
}
