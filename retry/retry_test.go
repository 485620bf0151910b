package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
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

// recorder is a Hooks.Retry that records every event.
type recorder struct {
	mu     sync.Mutex
	events []observe.RetryEvent
}

func (r *recorder) ctx(parent context.Context) context.Context {
	return observe.WithHooks(parent, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
	}})
}

func (r *recorder) get() []observe.RetryEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.RetryEvent(nil), r.events...)
}

func TestDoExhausts(t *testing.T) {
	calls := 0
	var rec recorder
	p := retry.Policy{MaxAttempts: 4, BaseDelay: time.Microsecond}
	err := retry.Do(rec.ctx(t.Context()), p, func(context.Context) error { calls++; return retryable{} })
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) || ex.Attempts != 4 || calls != 4 || ex.OutOfTime {
		t.Fatalf("err=%v calls=%d, want ExhaustedError after 4 (attempts, not time)", err, calls)
	}
	if !errors.Is(err, retry.ErrExhausted) || !errors.As(err, new(retryable)) {
		t.Fatalf("ExhaustedError must match ErrExhausted and unwrap to the last error: %v", err)
	}
	var retried []int
	for _, e := range rec.get() {
		if !e.GaveUp {
			retried = append(retried, e.Attempt)
		}
	}
	if fmt.Sprint(retried) != "[1 2 3]" {
		t.Fatalf("Hooks.Retry saw retries of %v, want [1 2 3]", retried)
	}
}

// TestDoHooks: one event per retried failure, before its backoff, with the
// attempt's error and delay; one GaveUp event with the last error when the
// budget runs out; nothing for a failure that is not retried.
func TestDoHooks(t *testing.T) {
	var rec recorder
	ctx := rec.ctx(t.Context())
	errs := []error{retryable{}, fmt.Errorf("wrapped: %w", retryable{}), retryable{}}
	calls := 0
	p := retry.Policy{MaxAttempts: 3, BaseDelay: time.Microsecond, MaxDelay: 4 * time.Microsecond}
	err := retry.Do(ctx, p, func(ctx context.Context) error {
		if n := len(rec.get()); n != calls {
			t.Errorf("attempt %d began after %d events, want %d (one per failure, before the backoff)", calls+1, n, calls)
		}
		calls++
		return errs[calls-1]
	})
	if !errors.Is(err, retry.ErrExhausted) {
		t.Fatalf("err = %v", err)
	}
	got := rec.get()
	if len(got) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(got), got)
	}
	for i, e := range got {
		if e.Package != "retry" || e.Attempt != i+1 || e.Err != errs[i] {
			t.Errorf("event %d = %+v, want Package retry, Attempt %d, Err %v", i, e, i+1, errs[i])
		}
		if gaveUp := i == 2; e.GaveUp != gaveUp {
			t.Errorf("event %d GaveUp = %v", i, e.GaveUp)
		}
		if e.Delay < 0 || e.Delay > 4*time.Microsecond || e.GaveUp && e.Delay != 0 {
			t.Errorf("event %d delay %v", i, e.Delay)
		}
	}

	// Not retried: no event. Success after a retry: the retry only.
	var rec2 recorder
	_ = retry.Do(rec2.ctx(t.Context()), retry.Policy{}, func(context.Context) error { return errPermanent })
	n := 0
	_ = retry.Do(rec2.ctx(t.Context()), retry.Policy{BaseDelay: time.Microsecond}, func(context.Context) error {
		if n++; n == 1 {
			return retryable{}
		}
		return nil
	})
	if got := rec2.get(); len(got) != 1 || got[0].GaveUp || got[0].Attempt != 1 {
		t.Fatalf("events %+v, want one retry of attempt 1", got)
	}
}

// TestDoMaxElapsedGaveUp: the time budget ends the loop with OutOfTime,
// says so, and reports GaveUp.
func TestDoMaxElapsedGaveUp(t *testing.T) {
	var rec recorder
	p := retry.Policy{MaxAttempts: 1 << 30, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxElapsed: 20 * time.Millisecond}
	err := retry.Do(rec.ctx(t.Context()), p, func(context.Context) error { return retryable{} })
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) || !ex.OutOfTime {
		t.Fatalf("err = %#v, want *ExhaustedError with OutOfTime", err)
	}
	want := fmt.Sprintf("retry: gave up after %d attempts (time budget used up): temporary", ex.Attempts)
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	got := rec.get()
	if len(got) != ex.Attempts || !got[len(got)-1].GaveUp || got[len(got)-1].Attempt != ex.Attempts {
		t.Fatalf("events %+v for %d attempts, want one per attempt, the last GaveUp", got, ex.Attempts)
	}
}

// TestDoNoHooksAllocs: without hooks the loop allocates nothing per
// attempt: a call that fails 10 times allocates what a call that fails
// three times does (the timer, the ExhaustedError). (Three, not two: a
// backoff of 0 creates no timer, and two of them in a row are unlikely.)
func TestDoNoHooksAllocs(t *testing.T) {
	ctx := context.Background()
	always := func(error) bool { return true } // IsRetryable's errors.As allocates; not what is measured
	var err error = retryable{}
	fail := func(context.Context) error { return err }
	allocs := func(attempts int) float64 {
		p := retry.Policy{MaxAttempts: attempts, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond, Retryable: always}
		return testing.AllocsPerRun(10, func() { _ = retry.Do(ctx, p, fail) })
	}
	three, ten := allocs(3), allocs(10)
	t.Logf("allocations: %v for 3 attempts, %v for 10", three, ten)
	if ten != three {
		t.Fatalf("%v allocations for 10 attempts, %v for 3: the loop allocates per attempt", ten, three)
	}
	// Hooks installed but without a Retry callback cost nothing either.
	hctx := observe.WithHooks(ctx, &observe.Hooks{})
	p := retry.Policy{MaxAttempts: 10, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond, Retryable: always}
	if with := testing.AllocsPerRun(10, func() { _ = retry.Do(hctx, p, fail) }); with != ten {
		t.Fatalf("%v allocations with empty hooks, %v without", with, ten)
	}
}

func TestDoMaxElapsed(t *testing.T) {
	p := retry.Policy{MaxAttempts: 1 << 30, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxElapsed: 20 * time.Millisecond}
	var calls atomic.Int64
	err := retry.Do(t.Context(), p, func(context.Context) error { calls.Add(1); return retryable{} })
	if !errors.Is(err, retry.ErrExhausted) || !errors.As(err, new(*retry.ExhaustedError)) {
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
			if !errors.Is(err, concurkit.ErrInvalidArgument) || called {
				t.Fatalf("err=%v called=%v", err, called)
			}
			if !strings.HasPrefix(err.Error(), "retry: invalid policy: ") {
				t.Errorf("message %q", err)
			}
			if err := tc.p.Validate(); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("Validate = %v", err)
			}
		})
	}
	err := retry.Do(t.Context(), retry.Policy{}, nil)
	if !errors.Is(err, concurkit.ErrInvalidArgument) || err.Error() != "retry: invalid argument: nil function" {
		t.Fatalf("nil fn: %v, want concurkit.ErrInvalidArgument", err)
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

// TestDefaultBudgetIsTime: the zero Policy is bounded by time, not by a
// count. Under the old default (10 attempts) a read-modify-write that lost
// its race 30 times in a row — routine on a hot row with many writers —
// was given up; now it runs until it wins, within DefaultMaxElapsed.
func TestDefaultBudgetIsTime(t *testing.T) {
	t.Parallel()
	calls := 0
	p := retry.Policy{BaseDelay: time.Microsecond, MaxDelay: time.Microsecond} // attempts and time budget left at their defaults
	err := retry.Do(t.Context(), p, func(context.Context) error {
		if calls++; calls <= 30 {
			return retryable{}
		}
		return nil
	})
	if err != nil || calls != 31 {
		t.Fatalf("30 conflicts then success: err=%v after %d calls; want nil after 31", err, calls)
	}
}

// TestDefaultTimeBudgetEnds: a call that never wins gives up once the
// default time budget is used up, with OutOfTime set — not at once, and not
// never.
func TestDefaultTimeBudgetEnds(t *testing.T) {
	t.Parallel()
	start := time.Now()
	calls := 0
	p := retry.Policy{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
	err := retry.Do(t.Context(), p, func(context.Context) error { calls++; return retryable{} })
	elapsed := time.Since(start)
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) || !ex.OutOfTime || ex.Attempts != calls {
		t.Fatalf("err=%v; want an ExhaustedError with OutOfTime after %d calls", err, calls)
	}
	if elapsed < retry.DefaultMaxElapsed-5*time.Millisecond {
		t.Fatalf("gave up after %v (%d calls); want about DefaultMaxElapsed (%v)", elapsed, calls, retry.DefaultMaxElapsed)
	}
	if calls <= 10 {
		t.Fatalf("only %d calls in %v", calls, elapsed)
	}
}

// TestMaxAttemptsAloneHasNoTimeBudget: a Policy that sets MaxAttempts and
// leaves MaxElapsed zero is bounded by attempts only, as before the time
// budget became the default.
func TestMaxAttemptsAloneHasNoTimeBudget(t *testing.T) {
	t.Parallel()
	calls := 0
	p := retry.Policy{MaxAttempts: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond}
	err := retry.Do(t.Context(), p, func(context.Context) error {
		calls++
		return retryable{}
	})
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) || ex.OutOfTime || calls != 3 {
		t.Fatalf("err=%v calls=%d; want an ExhaustedError (attempts) after 3", err, calls)
	}
}
