package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/internal/backendtest"
	"github.com/concurkit/concurkit/distlock/semaphore"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/observe"
)

// TestConformance runs distlocktest.Semaphore on every lock backend. The
// holders that must lose their permit get the backend's shortest TTL and
// stop renewing (the suite's default Expire: wait until the lease ended;
// the server frees the key at its TTL, or ends the idle PostgreSQL
// session), except on ZooKeeper, whose leases last as long as their
// session: there the holder is cut off from the servers until the server
// expired its session (backendtest.Options).
func TestConformance(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, backend string, newLocker distlocktest.NewLocker) {
		start := time.Now()
		distlocktest.Semaphore(t, newLocker, backendtest.Options(backend))
		t.Logf("%s: %v", backend, time.Since(start).Round(time.Millisecond))
	})
}

// fakeLocker is an in-process Locker whose permits can be made held,
// failing or closed, to check how the semaphore reads the errors of
// TryAcquire. Acquire is never used by the semaphore.
type fakeLocker struct {
	mu     sync.Mutex
	held   map[string]bool
	fail   map[string]error
	closed bool
	next   fenced.Token
	keys   []string           // every TryAcquire's key, in order
	opts   []distlock.Options // and its options
	called chan struct{}      // a token per TryAcquire (buffered)
}

func newFake() *fakeLocker {
	return &fakeLocker{held: map[string]bool{}, fail: map[string]error{}, called: make(chan struct{}, 1<<16)}
}

func (f *fakeLocker) Acquire(context.Context, string, *distlock.Options) (distlock.Lease, error) {
	return nil, errors.New("fakeLocker: Acquire is not used by the semaphore")
}

func (f *fakeLocker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		select {
		case f.called <- struct{}{}:
		default:
		}
	}()
	f.keys = append(f.keys, key)
	f.opts = append(f.opts, *opts)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case f.closed:
		return nil, fmt.Errorf("%w: %w: fake", distlock.ErrNotAcquired, distlock.ErrClosed)
	case f.fail[key] != nil:
		return nil, f.fail[key]
	case f.held[key]:
		return nil, distlock.ErrNotAcquired
	}
	f.held[key] = true
	f.next++
	ctx, cancel := context.WithCancelCause(context.Background())
	return &fakeLease{f: f, key: key, token: f.next, ctx: ctx, cancel: cancel}, nil
}

func (f *fakeLocker) set(fn func(f *fakeLocker)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// waitCalls waits until TryAcquire was called n more times.
func (f *fakeLocker) waitCalls(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.called:
		case <-time.After(30 * time.Second):
			t.Fatalf("fakeLocker: TryAcquire not called %d times within 30s", n)
		}
	}
}

type fakeLease struct {
	f      *fakeLocker
	key    string
	token  fenced.Token
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (l *fakeLease) Key() string                                 { return l.key }
func (l *fakeLease) Token() fenced.Token                         { return l.token }
func (l *fakeLease) Context() context.Context                    { return l.ctx }
func (l *fakeLease) Deadline() (time.Time, bool)                 { return time.Time{}, false }
func (l *fakeLease) Valid() bool                                 { return l.ctx.Err() == nil }
func (l *fakeLease) Extend(context.Context, time.Duration) error { return nil }
func (l *fakeLease) Release(context.Context) error {
	l.cancel(distlock.ErrReleased)
	l.f.set(func(f *fakeLocker) { delete(f.held, l.key) })
	return nil
}

var errDown = errors.New("server down")

func mustNew(t *testing.T, l distlock.Locker, name string, permits int, cfg *semaphore.Config) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(l, name, permits, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTryAcquireErrors: how one round reads the permits' errors.
func TestTryAcquireErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(f *fakeLocker)
		want      []error // the error must match each
		notWant   []error // and none of these
		callsUpTo int     // TryAcquire calls the round may make
	}{
		{
			name: "all held",
			setup: func(f *fakeLocker) {
				f.held["s/permit/0"], f.held["s/permit/1"], f.held["s/permit/2"] = true, true, true
			},
			want:      []error{distlock.ErrNotAcquired},
			notWant:   []error{errDown, context.Canceled},
			callsUpTo: 3,
		},
		{
			name: "held and down",
			setup: func(f *fakeLocker) {
				f.held["s/permit/0"], f.fail["s/permit/1"], f.fail["s/permit/2"] = true, errDown, errDown
			},
			want:      []error{distlock.ErrNotAcquired, errDown},
			callsUpTo: 3,
		},
		{
			name: "all down",
			setup: func(f *fakeLocker) {
				f.fail["s/permit/0"], f.fail["s/permit/1"], f.fail["s/permit/2"] = errDown, errDown, errDown
			},
			want:      []error{errDown},
			notWant:   []error{distlock.ErrNotAcquired},
			callsUpTo: 3,
		},
		{
			name: "keys the backend refuses",
			setup: func(f *fakeLocker) {
				for i := range 3 {
					f.fail[fmt.Sprintf("s/permit/%d", i)] = distlock.ErrInvalidKey
				}
			},
			want:      []error{distlock.ErrInvalidKey, concurkit.ErrInvalidArgument},
			notWant:   []error{distlock.ErrNotAcquired},
			callsUpTo: 3,
		},
		{
			name:      "closed",
			setup:     func(f *fakeLocker) { f.closed = true },
			want:      []error{distlock.ErrClosed, distlock.ErrNotAcquired},
			callsUpTo: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.set(tc.setup)
			s := mustNew(t, f, "s", 3, nil)
			lease, err := s.TryAcquire(t.Context())
			if lease != nil {
				t.Fatalf("TryAcquire got %q", lease.Key())
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("TryAcquire = %v, want it to match %v", err, w)
				}
			}
			for _, w := range tc.notWant {
				if errors.Is(err, w) {
					t.Errorf("TryAcquire = %v, want it not to match %v", err, w)
				}
			}
			if n := len(f.keys); n > tc.callsUpTo {
				t.Errorf("%d TryAcquire calls, want at most %d", n, tc.callsUpTo)
			}
			if errors.Is(err, errDown) && !strings.Contains(err.Error(), `permit "s/permit/`) {
				t.Errorf("error %q does not name the failed permit", err)
			}
		})
	}
}

// TestAcquireWaitsWhileSomeHeld: a permit that fails does not end the
// wait while another is merely held; the held one, once released, is
// taken.
func TestAcquireWaitsWhileSomeHeld(t *testing.T) {
	f := newFake()
	f.set(func(f *fakeLocker) { f.fail["s/permit/0"], f.held["s/permit/1"] = errDown, true })
	s := mustNew(t, f, "s", 2, &semaphore.Config{PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	got := make(chan distlock.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		lease, err := s.Acquire(t.Context())
		got <- lease
		errc <- err
	}()
	f.waitCalls(t, 6) // three rounds
	f.set(func(f *fakeLocker) { delete(f.held, "s/permit/1") })
	lease, err := <-got, <-errc
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if lease.Key() != "s/permit/1" {
		t.Fatalf("Acquire got %q, want s/permit/1", lease.Key())
	}
	_ = lease.Release(t.Context())
}

// TestAcquireStopsWhenWaitingCannotHelp: every permit failing, or a
// closed Locker, ends Acquire after one round.
func TestAcquireStopsWhenWaitingCannotHelp(t *testing.T) {
	for name, setup := range map[string]func(f *fakeLocker){
		"all down": func(f *fakeLocker) { f.fail["s/permit/0"], f.fail["s/permit/1"] = errDown, errDown },
		"closed":   func(f *fakeLocker) { f.closed = true },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			f.set(setup)
			s := mustNew(t, f, "s", 2, &semaphore.Config{PollMin: time.Hour, PollMax: time.Hour})
			lease, err := s.Acquire(t.Context())
			if lease != nil || err == nil {
				t.Fatalf("Acquire = (%v, %v), want an error", lease, err)
			}
			if name == "all down" && (!errors.Is(err, errDown) || errors.Is(err, distlock.ErrNotAcquired)) {
				t.Fatalf("Acquire with every permit down = %v, want the servers' errors, not ErrNotAcquired", err)
			}
			if name == "closed" && (!errors.Is(err, distlock.ErrClosed) || !errors.Is(err, distlock.ErrNotAcquired)) {
				t.Fatalf("Acquire on a closed Locker = %v, want ErrClosed and ErrNotAcquired", err)
			}
		})
	}
}

// TestAcquireCancelKeepsFailures: the error of a cancelled Acquire
// matches ctx.Err() and ErrNotAcquired, and carries the failures of the
// permits that could not be asked.
func TestAcquireCancelKeepsFailures(t *testing.T) {
	f := newFake()
	f.set(func(f *fakeLocker) { f.fail["s/permit/0"], f.held["s/permit/1"] = errDown, true })
	s := mustNew(t, f, "s", 2, &semaphore.Config{PollMin: time.Hour, PollMax: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx)
		errc <- err
	}()
	f.waitCalls(t, 2) // one round; then it waits up to an hour
	cancel()
	err := <-errc
	for _, w := range []error{context.Canceled, distlock.ErrNotAcquired, errDown} {
		if !errors.Is(err, w) {
			t.Errorf("cancelled Acquire = %v, want it to match %v", err, w)
		}
	}
}

// TestNilSemaphore: a nil or zero Semaphore is bad input, not a panic.
func TestNilSemaphore(t *testing.T) {
	for name, s := range map[string]*semaphore.Semaphore{"nil": nil, "zero": {}} {
		for call, fn := range map[string]func(context.Context) (distlock.Lease, error){"Acquire": s.Acquire, "TryAcquire": s.TryAcquire} {
			if lease, err := fn(t.Context()); lease != nil || !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("%s Semaphore: %s = (%v, %v), want ErrInvalidArgument", name, call, lease, err)
			}
		}
		if s.Permits() != 0 {
			t.Errorf("%s Semaphore: Permits() = %d", name, s.Permits())
		}
	}
}

// TestConfigPassed: TTL and AutoExtend reach the Locker; a nil Config
// passes zero options (the backend's defaults); the caller's Config is
// not modified.
func TestConfigPassed(t *testing.T) {
	f := newFake()
	cfg := &semaphore.Config{TTL: 3 * time.Second, AutoExtend: true}
	s := mustNew(t, f, "s", 1, cfg)
	lease, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(t.Context())
	if *cfg != (semaphore.Config{TTL: 3 * time.Second, AutoExtend: true}) {
		t.Errorf("New modified the Config: %+v", *cfg)
	}
	lease, err = mustNew(t, f, "s", 1, nil).TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(t.Context())
	want := []distlock.Options{{TTL: 3 * time.Second, AutoExtend: true}, {}}
	if len(f.opts) != 2 || f.opts[0] != want[0] || f.opts[1] != want[1] {
		t.Errorf("options seen by the Locker %+v, want %+v", f.opts, want)
	}
}

// TestRandomStart: rounds start at a random permit, so contenders spread
// over the permits instead of all asking for permit 0 first.
func TestRandomStart(t *testing.T) {
	f := newFake()
	const permits, rounds = 4, 400
	s := mustNew(t, f, "s", permits, nil)
	first := map[string]int{}
	for range rounds {
		lease, err := s.TryAcquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		first[lease.Key()]++ // every permit is free: the first one asked is granted
		_ = lease.Release(t.Context())
	}
	for i := range permits {
		// Binomial(400, 1/4): mean 100, sd 8.7; below 50 is 5.7 sd away.
		if n := first[fmt.Sprintf("s/permit/%d", i)]; n < 50 {
			t.Errorf("permit %d asked first in %d of %d rounds, want about %d: %v", i, n, rounds, rounds/permits, first)
		}
	}
}

// TestLockWaitReported: an Acquire that had to wait reports one LockWait
// event under the semaphore's name; one that did not wait reports none.
func TestLockWaitReported(t *testing.T) {
	f := newFake()
	var (
		mu     sync.Mutex
		events []observe.LockWaitEvent
	)
	ctx := observe.WithHooks(t.Context(), &observe.Hooks{LockWait: func(_ context.Context, e observe.LockWaitEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}})
	s := mustNew(t, f, "jobs", 1, &semaphore.Config{PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	first, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan distlock.Lease, 1)
	go func() {
		lease, err := s.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	f.waitCalls(t, 3) // the first Acquire's call, then two rounds of the second
	_ = first.Release(ctx)
	if lease := <-got; lease != nil {
		_ = lease.Release(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Package != "semaphore" || events[0].Key != "jobs" || events[0].Err != nil || events[0].Attempts < 2 {
		t.Fatalf("LockWait events %+v, want one for \"jobs\" of package semaphore, acquired after 2 or more attempts", events)
	}
}
