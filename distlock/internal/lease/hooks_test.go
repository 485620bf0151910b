package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/observe"
)

// hookLog records the events a Hooks receives.
type hookLog struct {
	mu      sync.Mutex
	waits   []observe.LockWaitEvent
	extends []observe.LeaseEvent
	losses  []observe.LeaseEvent
	// onLost, if set, runs inside the LeaseLost callback (to show that a
	// callback may use the lease).
	onLost func()
}

func (r *hookLog) hooks() *observe.Hooks {
	return &observe.Hooks{
		LockWait: func(_ context.Context, e observe.LockWaitEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.waits = append(r.waits, e)
		},
		LeaseExtend: func(_ context.Context, e observe.LeaseEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.extends = append(r.extends, e)
		},
		LeaseLost: func(_ context.Context, e observe.LeaseEvent) {
			if r.onLost != nil {
				r.onLost()
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.losses = append(r.losses, e)
		},
	}
}

func (r *hookLog) snapshot() (waits []observe.LockWaitEvent, extends, losses []observe.LeaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.LockWaitEvent(nil), r.waits...), append([]observe.LeaseEvent(nil), r.extends...), append([]observe.LeaseEvent(nil), r.losses...)
}

// TestHooksExtendAndLoss: every Extend attempt is reported with its
// outcome (bad input is not an attempt); the loss it causes is reported
// once, with its cause, and a callback may use the lease.
func TestHooksExtendAndLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log hookLog
		var r recorder
		l, err := lease.New(lease.Config{Package: "testlock", Key: "k", Token: 7, TTL: time.Minute, Hooks: log.hooks(), Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		log.onLost = func() { _ = l.Valid(); _ = l.Err() } // no deadlock on the lease's mutex
		if err := l.Extend(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		_ = l.Extend(t.Context(), -1) // bad input: not an attempt
		boom := errors.New("timeout")
		r.extendErr.Store(&boom)
		if err := l.Extend(t.Context(), 0); !errors.Is(err, boom) {
			t.Fatalf("Extend = %v", err)
		}
		gone := distlock.ErrLeaseLost
		r.extendErr.Store(&gone)
		if err := l.Extend(t.Context(), 0); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("Extend = %v", err)
		}
		l.Lost(errors.New("again")) // already lost: not reported twice
		_ = l.Release(t.Context())
		_, extends, losses := log.snapshot()
		if len(extends) != 3 || extends[0].Err != nil || !errors.Is(extends[1].Err, boom) || !errors.Is(extends[2].Err, distlock.ErrLeaseLost) {
			t.Fatalf("LeaseExtend events %+v, want nil, timeout, lease lost", extends)
		}
		for _, e := range extends {
			if e.Package != "testlock" || e.Key != "k" || e.Token != 7 {
				t.Fatalf("event %+v", e)
			}
		}
		if len(losses) != 1 || !errors.Is(losses[0].Err, distlock.ErrLeaseLost) || losses[0].Token != 7 {
			t.Fatalf("LeaseLost events %+v, want one", losses)
		}
	})
}

// TestHooksAutoExtendFailureReported: the failures of the auto-extend
// goroutine, which returns its errors to nobody, reach LeaseExtend, and
// the expiry they lead to reaches LeaseLost once.
func TestHooksAutoExtendFailureReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log hookLog
		var r recorder
		frozen := context.DeadlineExceeded
		r.extendErr.Store(&frozen)
		l, err := lease.New(lease.Config{Package: "testlock", Key: "k", Token: 1, TTL: 3 * time.Second, AutoExtend: true, Hooks: log.hooks(), Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		<-l.Context().Done()
		synctest.Wait()
		_, extends, losses := log.snapshot()
		if len(extends) == 0 {
			t.Fatal("no LeaseExtend event for the failed auto-extensions")
		}
		for _, e := range extends {
			if e.Err == nil {
				t.Fatalf("event %+v: a failed extension reported as a success", e)
			}
		}
		if len(losses) != 1 || !errors.Is(losses[0].Err, lease.ErrExpired) {
			t.Fatalf("LeaseLost events %+v, want one expiry", losses)
		}
		_ = l.Release(t.Context())
	})
}

// TestHooksExpiryAndRelease: an expiry found by the timer or by Valid
// after a pause is reported once; a released lease reports no loss.
func TestHooksExpiryAndRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log hookLog
		h := log.hooks()
		byTimer, _ := lease.New(lease.Config{Key: "timer", Token: 1, TTL: time.Second, Hooks: h})
		byValid, _ := lease.New(lease.Config{Key: "valid", Token: 2, TTL: time.Second, Hooks: h})
		released, _ := lease.New(lease.Config{Key: "released", Token: 3, TTL: time.Second, Hooks: h})
		lostEarly, _ := lease.New(lease.Config{Key: "early", Token: 4, TTL: time.Second, Start: time.Now().Add(-time.Hour), Hooks: h})
		lease.PauseTimer(byValid)
		if err := released.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if byValid.Valid() {
			t.Fatal("valid after its deadline")
		}
		_, _, losses := log.snapshot()
		keys := map[string]int{}
		for _, e := range losses {
			keys[e.Key]++
			if e.Package != "distlock" || !errors.Is(e.Err, lease.ErrExpired) {
				t.Errorf("event %+v", e)
			}
		}
		if len(losses) != 3 || keys["timer"] != 1 || keys["valid"] != 1 || keys["early"] != 1 {
			t.Fatalf("LeaseLost for %v, want timer, valid and early once each (not released)", keys)
		}
		for _, l := range []*lease.Lease{byTimer, byValid, lostEarly} {
			_ = l.Release(t.Context())
		}
	})
}

// TestHooksPoll: an acquisition reports LockWait only when it found the
// lock held: with its attempts, its wait and its outcome.
func TestHooksPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log hookLog
		ctx := observe.WithHooks(t.Context(), log.hooks())
		p := lease.PollPolicy{Package: "testlock", Key: "k"}
		if _, err := lease.Poll(ctx, p, func(context.Context) (int, error) { return 1, nil }); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("server down")
		if _, err := lease.Poll(ctx, p, func(context.Context) (int, error) { return 0, boom }); err != boom {
			t.Fatal(err)
		}
		if waits, _, _ := log.snapshot(); len(waits) != 0 {
			t.Fatalf("LockWait %+v for acquisitions that did not wait", waits)
		}
		n := 0
		start := time.Now()
		if _, err := lease.Poll(ctx, p, func(context.Context) (int, error) {
			if n++; n < 4 {
				return 0, distlock.ErrNotAcquired
			}
			return 1, nil
		}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := lease.Poll(tctx, p, func(context.Context) (int, error) { return 0, distlock.ErrNotAcquired })
		waits, _, _ := log.snapshot()
		if len(waits) != 2 {
			t.Fatalf("LockWait events %+v, want 2", waits)
		}
		if w := waits[0]; w.Package != "testlock" || w.Key != "k" || w.Attempts != 4 || w.Err != nil || w.Wait != took {
			t.Errorf("acquired after waiting: %+v (took %v)", w, took)
		}
		if w := waits[1]; w.Attempts < 2 || !errors.Is(w.Err, context.DeadlineExceeded) || !errors.Is(w.Err, distlock.ErrNotAcquired) || w.Wait != time.Second || !errors.Is(err, w.Err) {
			t.Errorf("timed out: %+v", w)
		}
	})
}

// TestNoHookAllocations: without hooks, a lease costs no more
// allocations than before hooks existed (14 for New+Release, measured on
// the code before), and a Poll that acquires at once allocates nothing.
func TestNoHookAllocations(t *testing.T) {
	ctx := context.Background()
	be := lease.Backend{Release: func(context.Context) error { return nil }}
	n := testing.AllocsPerRun(200, func() {
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("New+Release: %v allocations", n)
	if n > 14 {
		t.Errorf("New+Release: %v allocations, want at most 14", n)
	}
	try := func(context.Context) (int, error) { return 1, nil }
	if n := testing.AllocsPerRun(200, func() { _, _ = lease.Poll(ctx, lease.PollPolicy{Key: "k"}, try) }); n != 0 {
		t.Errorf("Poll: %v allocations, want 0", n)
	}
}

// TestHooksAutoExtendFrozenServer: an auto-extension against a server
// that answers nothing is given up after TTL/3, so its failure reaches the
// hooks while the lease still holds (a warning), not only at its expiry.
func TestHooksAutoExtendFrozenServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log hookLog
		var firstFailure time.Time
		var lostAt time.Time
		h := log.hooks()
		extend := h.LeaseExtend
		h.LeaseExtend = func(ctx context.Context, e observe.LeaseEvent) {
			if e.Err != nil && firstFailure.IsZero() {
				firstFailure = time.Now()
			}
			extend(ctx, e)
		}
		lost := h.LeaseLost
		h.LeaseLost = func(ctx context.Context, e observe.LeaseEvent) { lostAt = time.Now(); lost(ctx, e) }
		start := time.Now()
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: 3 * time.Second, AutoExtend: true, Hooks: h,
			Backend: lease.Backend{Extend: func(ctx context.Context, _ time.Duration) error {
				<-ctx.Done() // frozen
				return ctx.Err()
			}}})
		if err != nil {
			t.Fatal(err)
		}
		<-l.Context().Done()
		synctest.Wait()
		if firstFailure.IsZero() || !firstFailure.Before(lostAt) {
			t.Fatalf("first failed extension at %v, loss at %v: want the failure reported while the lease held",
				firstFailure.Sub(start), lostAt.Sub(start))
		}
		if got := firstFailure.Sub(start); got != 2*time.Second {
			t.Errorf("first failure reported after %v, want 2s (attempt at TTL/3, given up after TTL/3)", got)
		}
		_ = l.Release(t.Context())
	})
}
