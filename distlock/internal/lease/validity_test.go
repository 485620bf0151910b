package lease_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
)

// TestStartsLostWhenValidityOver: a lease whose validity is over when New
// runs is returned with its context already done (not a live context
// that a timer cancels later), and it never becomes valid.
func TestStartsLostWhenValidityOver(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		cfg  lease.Config
	}{
		{"start a TTL ago", lease.Config{TTL: time.Second, Start: now.Add(-2 * time.Second)}},
		{"start just past the deadline", lease.Config{TTL: time.Second, Start: now.Add(-888 * time.Millisecond)}},
		{"TTL below the default drift", lease.Config{TTL: time.Millisecond}},
		{"drift eats the TTL", lease.Config{TTL: time.Second, Drift: time.Second}},
		{"margin eats the TTL", lease.Config{TTL: time.Second, Drift: -1, Margin: time.Second}},
		{"max drift (overflow)", lease.Config{TTL: time.Second, Drift: math.MaxInt64}},
		{"max margin (overflow)", lease.Config{TTL: time.Second, Margin: math.MaxInt64}},
		{"max drift and margin (overflow)", lease.Config{TTL: time.Second, Drift: math.MaxInt64, Margin: math.MaxInt64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			cfg := tc.cfg
			cfg.Key, cfg.Token, cfg.Backend, cfg.AutoExtend = "k", 1, r.backend(), true
			l, err := lease.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if l.Context().Err() == nil {
				t.Fatal("lease over at acquisition has a live context")
			}
			if c := context.Cause(l.Context()); !errors.Is(c, lease.ErrExpired) {
				t.Fatalf("cause = %v, want ErrExpired", c)
			}
			if l.Valid() {
				t.Fatal("Valid() = true")
			}
			if err := l.Extend(t.Context(), 0); !errors.Is(err, distlock.ErrLeaseLost) && !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("Extend = %v", err)
			}
			if err := l.Release(t.Context()); !errors.Is(err, lease.ErrExpired) {
				t.Fatalf("Release = %v, want ErrExpired", err)
			}
			if r.extends.Load() != 0 || r.releases.Load() != 1 {
				t.Fatalf("backend extends %d, releases %d; want 0, 1 (the cleanup still runs)", r.extends.Load(), r.releases.Load())
			}
		})
	}
}

// TestTTLEdges: a huge TTL or Extend ttl neither overflows the deadline
// into the past nor wraps a tiny validity into a huge one.
func TestTTLEdges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       lease.Config
		extend    time.Duration // 0: no Extend
		extendErr error
		valid     bool
		minLeft   time.Duration // lower bound of Deadline − now when valid
	}{
		{"max TTL", lease.Config{TTL: math.MaxInt64}, 0, nil, true, 100 * 365 * 24 * time.Hour},
		{"max TTL, no allowances", lease.Config{TTL: math.MaxInt64, Drift: -1, Margin: -1}, 0, nil, true, 100 * 365 * 24 * time.Hour},
		{"max TTL, max margin", lease.Config{TTL: math.MaxInt64, Margin: math.MaxInt64}, 0, nil, false, 0},
		{"extend to max", lease.Config{TTL: time.Second}, math.MaxInt64, nil, true, 100 * 365 * 24 * time.Hour},
		{"extend to max, large drift", lease.Config{TTL: time.Second, Drift: 900 * time.Millisecond, Margin: -1}, math.MaxInt64, nil, true, 10 * 365 * 24 * time.Hour},
		{"extend max TTL by max", lease.Config{TTL: math.MaxInt64}, math.MaxInt64, nil, true, 100 * 365 * 24 * time.Hour},
		{"extend 1ns", lease.Config{TTL: time.Second}, 1, concurkit.ErrInvalidArgument, true, 500 * time.Millisecond},
		{"extend negative", lease.Config{TTL: time.Second}, math.MinInt64, concurkit.ErrInvalidArgument, true, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			cfg := tc.cfg
			cfg.Key, cfg.Token, cfg.Backend = "k", 1, r.backend()
			l, err := lease.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.Background())
			if tc.extend != 0 {
				if err := l.Extend(t.Context(), tc.extend); !errors.Is(err, tc.extendErr) || (err == nil) != (tc.extendErr == nil) {
					t.Fatalf("Extend(%v) = %v, want %v", tc.extend, err, tc.extendErr)
				}
			}
			if got := l.Valid(); got != tc.valid {
				t.Fatalf("Valid() = %v, want %v (cause %v)", got, tc.valid, context.Cause(l.Context()))
			}
			dl, ok := l.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			if tc.valid {
				if left := time.Until(dl); left < tc.minLeft {
					t.Fatalf("deadline in %v, want at least %v", left, tc.minLeft)
				}
				if l.Context().Err() != nil {
					t.Fatalf("valid lease's context done: %v", context.Cause(l.Context()))
				}
			}
		})
	}
}

// TestExtendKeepsConfiguredAllowances: an Extend with a ttl other than the
// acquisition TTL keeps the configured drift and margin (scaled up for a
// longer ttl), instead of replacing them with the defaults for ttl; a
// ttl they leave nothing of is rejected before reaching the backend.
func TestExtendKeepsConfiguredAllowances(t *testing.T) {
	for _, tc := range []struct {
		name          string
		drift, margin time.Duration
		ttl           time.Duration
		want          time.Duration // deadline − Extend time; 0: ErrInvalidOptions
	}{
		{"same ttl", 50 * time.Millisecond, 300 * time.Millisecond, time.Second, 650 * time.Millisecond},
		{"longer ttl scales", 50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, 1300 * time.Millisecond},
		{"shorter ttl keeps", 50 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 150 * time.Millisecond},
		{"shorter ttl left with nothing", 50 * time.Millisecond, 300 * time.Millisecond, 350 * time.Millisecond, 0},
		{"no allowances", -1, -1, 2 * time.Second, 2 * time.Second},
		{"defaults scale", 0, 0, 3 * time.Second, 3*time.Second - 3*12*time.Millisecond - 3*100*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var r recorder
				l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Second, Drift: tc.drift, Margin: tc.margin, Backend: r.backend()})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Release(context.Background())
				time.Sleep(100 * time.Millisecond)
				at := time.Now()
				err = l.Extend(t.Context(), tc.ttl)
				if tc.want == 0 {
					if !errors.Is(err, concurkit.ErrInvalidArgument) || r.extends.Load() != 0 {
						t.Fatalf("Extend(%v) = %v after %d backend calls, want ErrInvalidOptions before any", tc.ttl, err, r.extends.Load())
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if dl, _ := l.Deadline(); dl.Sub(at) != tc.want {
					t.Fatalf("Extend(%v): deadline %v after the call, want %v", tc.ttl, dl.Sub(at), tc.want)
				}
			})
		})
	}
}

// TestValidAfterPause: after a pause (the expiry timer has not run
// although the deadline passed), Valid reports false at once and marks the
// lease lost, so the context's cause is right immediately after; Extend
// does not revive it.
func TestValidAfterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		start := time.Now()
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Second, Start: start, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		dl, ok := l.Deadline()
		if !ok || !dl.Equal(start.Add(888*time.Millisecond)) {
			t.Fatalf("Deadline = %v, %v", dl.Sub(start), ok)
		}
		if !l.Valid() {
			t.Fatal("fresh lease not valid")
		}
		lease.PauseTimer(l)
		time.Sleep(888 * time.Millisecond) // exactly at the deadline: over
		if l.Context().Err() != nil {
			t.Fatal("the paused timer fired: the test does not simulate a pause")
		}
		if l.Valid() {
			t.Fatal("Valid() = true after the deadline (the timer has not fired yet)")
		}
		if c := context.Cause(l.Context()); !errors.Is(c, lease.ErrExpired) {
			t.Fatalf("right after Valid() = false, cause = %v, want ErrExpired", c)
		}
		if err := l.Extend(t.Context(), 0); !errors.Is(err, lease.ErrExpired) || r.extends.Load() != 0 {
			t.Fatalf("Extend after the pause = %v (backend calls %d)", err, r.extends.Load())
		}
		if dl2, _ := l.Deadline(); !dl2.Equal(dl) {
			t.Fatal("Deadline changed by the loss")
		}
		_ = l.Release(t.Context())
	})
}

// TestExtendSlowerThanValidity: an Extend whose backend call outlasts the
// current deadline (a pause, a frozen server that answers late) cannot
// revive the lease, whether or not the expiry timer has run.
func TestExtendSlowerThanValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Second, Backend: lease.Backend{
			Extend: func(context.Context, time.Duration) error {
				time.Sleep(2 * time.Second) // answers late, ignoring the cancellation
				return nil
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		lease.PauseTimer(l)
		if err := l.Extend(t.Context(), 0); !errors.Is(err, lease.ErrExpired) {
			t.Fatalf("late Extend = %v, want ErrExpired", err)
		}
		if l.Valid() || l.Context().Err() == nil {
			t.Fatal("lease valid after a late Extend")
		}
		_ = l.Release(t.Context())
	})
}
