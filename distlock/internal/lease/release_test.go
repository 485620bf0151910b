package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/observe"
)

// frozenRelease is a Backend.Release against a frozen server: it answers
// nothing until its context ends. It records the context it got.
type frozenRelease struct {
	got chan context.Context
}

func (f *frozenRelease) release(ctx context.Context) error {
	f.got <- ctx
	<-ctx.Done()
	return ctx.Err()
}

// TestReleaseBoundedByCallerDeadline: against a frozen server, Release
// returns when the caller's context ends (not after the cleanup timeout,
// not never), says the release is unconfirmed and matches ctx.Err(); the
// lease is released at once; the cleanup goes on, bounded by the cleanup
// timeout, and a second Release waits for it.
func TestReleaseBoundedByCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &frozenRelease{got: make(chan context.Context, 1)}
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, CleanupTimeout: 3 * time.Second,
			Backend: lease.Backend{Release: f.release}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err = l.Release(ctx)
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("Release returned after %v, want the caller's 2s", took)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "unconfirmed") || !errors.Is(err, concurkit.ErrOutcomeUnknown) {
			t.Fatalf("Release = %v, want an unconfirmed release matching context.DeadlineExceeded and concurkit.ErrOutcomeUnknown", err)
		}
		if got := observe.ErrorType(err); got != "outcome_unknown" {
			t.Errorf("ErrorType = %q, want outcome_unknown", got)
		}
		if l.Valid() || !errors.Is(context.Cause(l.Context()), distlock.ErrReleased) {
			t.Fatalf("after Release: Valid %v, cause %v", l.Valid(), context.Cause(l.Context()))
		}
		bctx := <-f.got
		if dl, ok := bctx.Deadline(); !ok || !dl.Equal(start.Add(3*time.Second)) {
			t.Fatalf("cleanup deadline %v (%v), want the cleanup timeout 3s after Release", dl.Sub(start), ok)
		}
		// A second Release waits for the cleanup, which ends at its timeout.
		err = l.Release(context.Background())
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("second Release returned after %v, want the cleanup timeout 3s", took)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, concurkit.ErrOutcomeUnknown) {
			t.Fatalf("second Release = %v, want the cleanup's outcome (its timeout, outcome unknown)", err)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("third Release = %v, want nil (outcome already reported)", err)
		}
	})
}

// TestReleaseCancelledContextStillCleansUp: a cancelled request still
// releases its lock: the backend gets a context without the caller's
// cancellation (but with the cleanup timeout); Release itself returns at
// once, unconfirmed.
func TestReleaseCancelledContextStillCleansUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var backendErr error
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, Backend: lease.Backend{
			Release: func(ctx context.Context) error {
				<-gate
				backendErr = ctx.Err()
				if _, ok := ctx.Deadline(); !ok {
					return errors.New("cleanup without a deadline")
				}
				return nil
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := l.Release(ctx); !errors.Is(err, context.Canceled) || !errors.Is(err, concurkit.ErrOutcomeUnknown) {
			t.Fatalf("Release(cancelled) = %v, want unconfirmed matching context.Canceled and concurkit.ErrOutcomeUnknown", err)
		}
		close(gate)
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("second Release = %v, want the cleanup's nil outcome", err)
		}
		if backendErr != nil {
			t.Fatalf("backend release saw a cancelled context: %v", backendErr)
		}
		if err := l.Extend(t.Context(), 0); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("Extend after Release = %v", err)
		}
	})
}

// TestReleaseDefaultCleanupTimeout: zero CleanupTimeout is
// distlock.DefaultCleanupTimeout; negative is rejected.
func TestReleaseDefaultCleanupTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &frozenRelease{got: make(chan context.Context, 1)}
		l, err := lease.New(lease.Config{Key: "k", Token: 1, Backend: lease.Backend{Release: f.release}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = l.Release(context.Background())
		if took := time.Since(start); took != distlock.DefaultCleanupTimeout {
			t.Fatalf("cleanup of a frozen server took %v, want %v", took, distlock.DefaultCleanupTimeout)
		}
	})
	if _, err := lease.New(lease.Config{Key: "k", Token: 1, CleanupTimeout: -1}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("negative CleanupTimeout: %v", err)
	}
}

// TestReleaseCancelsExtendInFlight: an Extend blocked on a frozen server
// (with a caller context that never ends) does not hold Release up: the
// lease's release cancels it, then the backend cleanup runs.
func TestReleaseCancelsExtendInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		extending := make(chan struct{})
		released := false
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, Backend: lease.Backend{
			Extend: func(ctx context.Context, _ time.Duration) error {
				close(extending)
				<-ctx.Done()
				return ctx.Err()
			},
			Release: func(context.Context) error { released = true; return nil },
		}})
		if err != nil {
			t.Fatal(err)
		}
		extended := make(chan error, 1)
		go func() { extended <- l.Extend(context.Background(), 0) }()
		<-extending
		if err := l.Release(context.Background()); err != nil || !released {
			t.Fatalf("Release = %v (backend release ran: %v)", err, released)
		}
		if err := <-extended; !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("Extend cancelled by Release = %v, want ErrLeaseLost", err)
		}
	})
}

// TestReleaseWaitsForAutoExtend: the auto-extend goroutine has exited when
// Release returns (synctest fails the test if it were still blocked).
func TestReleaseWaitsForAutoExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: 300 * time.Millisecond, AutoExtend: true, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r.releases.Load() != 1 {
			t.Fatalf("backend releases = %d", r.releases.Load())
		}
	})
}

// TestReleaseCleanupEndsAtTimeout: after an unconfirmed Release, nobody
// waits for the cleanup, and its goroutine still ends at the cleanup
// timeout (synctest.Test fails if a goroutine of the bubble is left
// blocked).
func TestReleaseCleanupEndsAtTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan error, 1)
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, CleanupTimeout: 2 * time.Second,
			Backend: lease.Backend{Release: func(ctx context.Context) error {
				<-ctx.Done() // frozen server
				ended <- ctx.Err()
				return ctx.Err()
			}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := l.Release(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Release = %v", err)
		}
		start := time.Now()
		if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cleanup ended with %v", err)
		}
		if waited := time.Since(start); waited != 1900*time.Millisecond {
			t.Fatalf("cleanup ended %v after Release returned, want at the 2s cleanup timeout", waited)
		}
	})
}
