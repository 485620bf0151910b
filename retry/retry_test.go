package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/retry"
)

type retryable struct{}

func (retryable) Error() string   { return "temporary" }
func (retryable) Retryable() bool { return true }

var errPermanent = errors.New("permanent")

func TestDoStopsOnSuccess(t *testing.T) {
	calls := 0
	err := retry.Do(t.Context(), retry.Policy{BaseDelay: time.Microsecond}, func(context.Context) error {
		calls++
		if calls < 3 {
			return retryable{}
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err=%v calls=%d, want nil and 3", err, calls)
	}
}

func TestDoReturnsPermanentAtOnce(t *testing.T) {
	calls := 0
	err := retry.Do(t.Context(), retry.Policy{}, func(context.Context) error {
		calls++
		return fmt.Errorf("wrapped: %w", errPermanent)
	})
	if !errors.Is(err, errPermanent) || calls != 1 {
		t.Fatalf("err=%v calls=%d, want permanent after 1 call", err, calls)
	}
	var ex *retry.ExhaustedError
	if errors.As(err, &ex) {
		t.Fatalf("permanent error reported as exhausted: %v", err)
	}
}

func TestDoExhausts(t *testing.T) {
	calls := 0
	var retried []int
	p := retry.Policy{MaxAttempts: 4, BaseDelay: time.Microsecond, OnRetry: func(n int, _ error, _ time.Duration) { retried = append(retried, n) }}
	err := retry.Do(t.Context(), p, func(context.Context) error { calls++; return retryable{} })
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) || ex.Attempts != 4 || calls != 4 {
		t.Fatalf("err=%v calls=%d, want ExhaustedError after 4", err, calls)
	}
	if !errors.Is(err, retry.ErrExhausted) || !errors.As(err, new(retryable)) {
		t.Fatalf("ExhaustedError must match ErrExhausted and unwrap to the last error: %v", err)
	}
	if fmt.Sprint(retried) != "[1 2 3]" {
		t.Fatalf("OnRetry saw %v, want [1 2 3]", retried)
	}
}

func TestDoMaxElapsed(t *testing.T) {
	p := retry.Policy{MaxAttempts: 1 << 30, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxElapsed: 20 * time.Millisecond}
	var calls atomic.Int64
	err := retry.Do(t.Context(), p, func(context.Context) error { calls.Add(1); return retryable{} })
	if !errors.Is(err, retry.ErrExhausted) {
		t.Fatalf("err=%v, want exhausted by MaxElapsed", err)
	}
	if calls.Load() < 2 {
		t.Fatalf("calls=%d, want retries before the budget ran out", calls.Load())
	}
}

func TestDoCancelJoinsLastError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p := retry.Policy{MaxAttempts: 1 << 30, BaseDelay: time.Hour, MaxDelay: time.Hour}
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- retry.Do(ctx, p, func(context.Context) error {
			select {
			case <-started:
			default:
				close(started)
			}
			return retryable{}
		})
	}()
	<-started
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !errors.As(err, new(retryable)) {
		t.Fatalf("err=%v, want both context.Canceled and the last error", err)
	}
}

func TestDoContextErrorsAreNotRetried(t *testing.T) {
	calls := 0
	err := retry.Do(t.Context(), retry.Policy{}, func(context.Context) error {
		calls++
		return errors.Join(retryable{}, context.DeadlineExceeded)
	})
	if calls != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
}

func TestDoBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    retry.Policy
	}{
		{"negative attempts", retry.Policy{MaxAttempts: -1}},
		{"negative base", retry.Policy{BaseDelay: -1}},
		{"negative cap", retry.Policy{MaxDelay: -1}},
		{"negative elapsed", retry.Policy{MaxElapsed: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			err := retry.Do(t.Context(), tc.p, func(context.Context) error { called = true; return nil })
			if !errors.Is(err, retry.ErrInvalidPolicy) || called {
				t.Fatalf("err=%v called=%v", err, called)
			}
		})
	}
	if err := retry.Do(t.Context(), retry.Policy{}, nil); err == nil {
		t.Fatal("nil fn accepted")
	}
}

func TestBackoffFullJitterWithinCap(t *testing.T) {
	p := retry.Policy{BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond}
	for attempt, ceil := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 4: 80 * time.Millisecond, 10: 80 * time.Millisecond, 100: 80 * time.Millisecond} {
		var maxSeen time.Duration
		for range 2000 {
			d := p.Backoff(attempt)
			if d < 0 || d > ceil {
				t.Fatalf("attempt %d: delay %v outside [0, %v]", attempt, d, ceil)
			}
			maxSeen = max(maxSeen, d)
		}
		// Full jitter spreads over the whole range: with 2000 draws the
		// largest is above half the ceiling with overwhelming probability.
		if maxSeen < ceil/2 {
			t.Fatalf("attempt %d: max delay %v never reached half of %v", attempt, maxSeen, ceil)
		}
	}
}

// TestExhaustedErrorMessage: singular for one attempt.
func TestExhaustedErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		want     string
	}{
		{1, "retry: gave up after 1 attempt: temporary"},
		{2, "retry: gave up after 2 attempts: temporary"},
	} {
		err := retry.Do(t.Context(), retry.Policy{MaxAttempts: tc.attempts, BaseDelay: time.Microsecond}, func(context.Context) error { return retryable{} })
		if err == nil || err.Error() != tc.want {
			t.Errorf("MaxAttempts %d: %v, want %q", tc.attempts, err, tc.want)
		}
	}
}

// TestBackoffLargeBaseDoesNotWrap: BaseDelay·2^(n-1) beyond int64 must
// saturate at MaxDelay, not wrap around to a tiny cap.
func TestBackoffLargeBaseDoesNotWrap(t *testing.T) {
	// (2^40+1)·2^24 wraps to 2^24 ns (16.8 ms) in int64 arithmetic.
	p := retry.Policy{BaseDelay: 1<<40 + 1, MaxDelay: 1 << 62}
	var maxSeen time.Duration
	for range 100 {
		maxSeen = max(maxSeen, p.Backoff(25))
	}
	if maxSeen <= 1<<24 {
		t.Fatalf("100 delays all <= %v: the cap wrapped around", time.Duration(1<<24))
	}
}

// TestBackoffMaxDelayMaxInt64: a cap of math.MaxInt64 ("no cap") must not
// overflow the jitter's range (rand.N(ceil+1) panicked).
func TestBackoffMaxDelayMaxInt64(t *testing.T) {
	for _, attempt := range []int{1, 2, 62, 63, 64, 1 << 30} {
		if d := (retry.Policy{BaseDelay: time.Hour, MaxDelay: math.MaxInt64}).Backoff(attempt); d < 0 {
			t.Fatalf("attempt %d: negative delay %v", attempt, d)
		}
	}
}
