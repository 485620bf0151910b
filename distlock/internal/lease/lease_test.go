package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/fenced"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Backend that counts calls.
type recorder struct {
	extends, releases atomic.Int32
	extendErr         atomic.Pointer[error]
	releaseCtxErr     atomic.Pointer[error]
}

func (r *recorder) backend() lease.Backend {
	return lease.Backend{
		Extend: func(ctx context.Context, ttl time.Duration) error {
			r.extends.Add(1)
			if p := r.extendErr.Load(); p != nil {
				return *p
			}
			return ctx.Err()
		},
		Release: func(ctx context.Context) error {
			r.releases.Add(1)
			err := ctx.Err()
			r.releaseCtxErr.Store(&err)
			return nil
		},
	}
}

func (r *recorder) failExtends(err error) { r.extendErr.Store(&err) }

func TestNewRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		cfg  lease.Config
		want error
	}{
		{"empty key", lease.Config{Token: 1, TTL: time.Second}, distlock.ErrInvalidKey},
		{"zero token", lease.Config{Key: "k", TTL: time.Second}, fenced.ErrInvalidToken},
		{"negative token", lease.Config{Key: "k", Token: -3, TTL: time.Second}, fenced.ErrInvalidToken},
		{"negative ttl", lease.Config{Key: "k", Token: 1, TTL: -time.Second}, concurkit.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := lease.New(tc.cfg)
			if !errors.Is(err, tc.want) || l != nil {
				t.Fatalf("New = %v, %v; want nil, %v", l, err, tc.want)
			}
		})
	}
}

func TestExpiresAtValidityMinusDriftAndMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		start := time.Now()
		l, err := lease.New(lease.Config{Key: "k", Token: 7, TTL: time.Second, Start: start, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		// 1s − (10ms + 2ms) drift − 100ms margin = 888ms.
		want := start.Add(888 * time.Millisecond)
		if got, ok := l.Deadline(); !ok || !got.Equal(want) {
			t.Fatalf("deadline %v, want %v", got.Sub(start), want.Sub(start))
		}
		if l.Key() != "k" || l.Token() != 7 {
			t.Fatalf("key/token = %q/%d", l.Key(), l.Token())
		}
		time.Sleep(887 * time.Millisecond)
		synctest.Wait()
		if err := l.Context().Err(); err != nil {
			t.Fatalf("context done before the deadline: %v", err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if l.Context().Err() == nil {
			t.Fatal("context not cancelled at the deadline")
		}
		if c := context.Cause(l.Context()); !errors.Is(c, lease.ErrExpired) || !errors.Is(c, distlock.ErrLeaseLost) {
			t.Fatalf("cause = %v", c)
		}
		if err := l.Extend(t.Context(), time.Second); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("Extend after expiry = %v", err)
		}
		if r.extends.Load() != 0 {
			t.Fatal("Extend after expiry reached the backend")
		}
		if err := l.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("Release after expiry = %v", err)
		}
		if r.releases.Load() != 1 {
			t.Fatalf("backend release ran %d times, want 1 (cleanup even after loss)", r.releases.Load())
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatalf("second Release = %v", err)
		}
		if r.releases.Load() != 1 {
			t.Fatal("second Release reached the backend")
		}
	})
}

func TestExtendMovesDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Second, Drift: -1, Margin: -1, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(900 * time.Millisecond)
		if err := l.Extend(t.Context(), 0); err != nil { // zero: the original TTL
			t.Fatal(err)
		}
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if err := l.Context().Err(); err != nil {
			t.Fatalf("extended lease expired early: %v", err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !errors.Is(context.Cause(l.Context()), lease.ErrExpired) {
			t.Fatalf("cause = %v", context.Cause(l.Context()))
		}
		if got := r.extends.Load(); got != 1 {
			t.Fatalf("backend extends = %d", got)
		}
		if err := l.Extend(t.Context(), -time.Second); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Fatalf("negative ttl: %v", err)
		}
		_ = l.Release(t.Context())
	})
}

func TestExtendErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Second, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		transient := errors.New("network timeout")
		r.failExtends(transient)
		if err := l.Extend(t.Context(), time.Second); !errors.Is(err, transient) {
			t.Fatalf("Extend = %v, want the transient error", err)
		}
		if l.Context().Err() != nil || l.Err() != nil {
			t.Fatal("a transient extend error lost the lease")
		}
		r.failExtends(distlock.ErrLeaseLost)
		if err := l.Extend(t.Context(), time.Second); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("Extend = %v, want ErrLeaseLost", err)
		}
		if !errors.Is(context.Cause(l.Context()), distlock.ErrLeaseLost) {
			t.Fatal("backend-reported loss did not cancel the context")
		}
		_ = l.Release(t.Context())
	})
}

func TestLostCancelsContext(t *testing.T) {
	var r recorder
	l, err := lease.New(lease.Config{Key: "k", Token: 1, Backend: r.backend()}) // no TTL: session lease
	if err != nil {
		t.Fatal(err)
	}
	if dl, ok := l.Deadline(); ok || !dl.IsZero() {
		t.Fatalf("session lease has a deadline: %v, %v", dl, ok)
	}
	if !l.Valid() {
		t.Fatal("session lease not valid")
	}
	sessionDied := errors.New("session expired")
	l.Lost(sessionDied)
	l.Lost(errors.New("second loss is ignored"))
	<-l.Context().Done()
	cause := context.Cause(l.Context())
	if !errors.Is(cause, sessionDied) || !errors.Is(cause, distlock.ErrLeaseLost) {
		t.Fatalf("cause = %v", cause)
	}
	if err := l.Release(t.Context()); !errors.Is(err, sessionDied) {
		t.Fatalf("Release = %v", err)
	}
	if r.releases.Load() != 1 {
		t.Fatal("no backend cleanup after loss")
	}
}

func TestReleaseReportsBackendLoss(t *testing.T) {
	l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, Backend: lease.Backend{
		Release: func(context.Context) error { return distlock.ErrLeaseLost },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release = %v", err)
	}
	other := errors.New("connection refused")
	l, _ = lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, Backend: lease.Backend{
		Release: func(context.Context) error { return other },
	}})
	if err := l.Release(t.Context()); !errors.Is(err, other) {
		t.Fatalf("Release = %v", err)
	}
}

func TestAutoExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: 300 * time.Millisecond, AutoExtend: true, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second + 50*time.Millisecond) // ticks at 100ms, 200ms, … 1000ms
		synctest.Wait()
		if got := r.extends.Load(); got != 10 {
			t.Fatalf("extends = %d, want 10", got)
		}
		if err := l.Context().Err(); err != nil {
			t.Fatalf("auto-extended lease expired: %v", context.Cause(l.Context()))
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if got := r.extends.Load(); got != 10 {
			t.Fatalf("extends after release = %d", got)
		}
	})
}

func TestAutoExtendStopsOnLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: 300 * time.Millisecond, AutoExtend: true, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		r.failExtends(distlock.ErrLeaseLost)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if !errors.Is(context.Cause(l.Context()), distlock.ErrLeaseLost) {
			t.Fatalf("cause = %v", context.Cause(l.Context()))
		}
		n := r.extends.Load()
		time.Sleep(time.Second)
		if r.extends.Load() != n {
			t.Fatal("auto-extend continued after loss")
		}
		// The goroutine has exited: synctest.Test fails if it is still blocked.
	})
}

func TestAutoExtendRetriesThenExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		r.failExtends(errors.New("i/o timeout"))
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: 1200 * time.Millisecond, AutoExtend: true, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		<-l.Context().Done()
		if !errors.Is(context.Cause(l.Context()), lease.ErrExpired) {
			t.Fatalf("cause = %v", context.Cause(l.Context()))
		}
		// deadline 1200−14−120 = 1066ms; first try at 400ms, then every 100ms.
		if got := r.extends.Load(); got != 7 {
			t.Fatalf("extend attempts = %d, want 7", got)
		}
		_ = l.Release(t.Context())
	})
}

// TestConcurrentUse runs Extend, Lost and Release from many goroutines
// (meaningful under -race): exactly one backend release happens.
func TestConcurrentUse(t *testing.T) {
	for range 50 {
		var r recorder
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, AutoExtend: true, Backend: r.backend()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 8 {
			wg.Go(func() {
				<-start
				switch i % 4 {
				case 0:
					_ = l.Release(context.Background())
				case 1:
					_ = l.Extend(context.Background(), time.Minute)
				case 2:
					l.Lost(errors.New("gone"))
				default:
					_ = l.Context().Err()
					_ = l.Err()
				}
			})
		}
		close(start)
		wg.Wait()
		_ = l.Release(context.Background())
		if r.releases.Load() != 1 {
			t.Fatalf("backend releases = %d", r.releases.Load())
		}
		if l.Context().Err() == nil {
			t.Fatal("context alive after release")
		}
	}
}
