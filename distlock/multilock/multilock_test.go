package multilock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/internal/backendtest"
	"github.com/concurkit/concurkit/distlock/multilock"
	"github.com/concurkit/concurkit/fenced"
)

// overlapDuration is how long TestOverlap runs the overlap check on each
// backend: 2 s by default (CI runs it on six backends; every client still
// completes a set), the soak with
// go test ./distlock/multilock -run Overlap -multilock.duration=60s
var overlapDuration = flag.Duration("multilock.duration", 2*time.Second,
	"how long TestOverlap locks overlapping sets on each backend")

// TestConformance runs distlocktest's multi-lock checks, but the overlap
// check (TestOverlap), on every backend. Leases that are made to expire
// get the backend's shortest TTL; on ZooKeeper, whose locks last as long
// as the session, a holder is cut off from the servers until its session
// expires (zkExpiry).
func TestConformance(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, backend string, newLocker distlocktest.NewLocker) {
		opts := backendtest.Options(backend)
		t.Run("BadInput", func(t *testing.T) { distlocktest.MultiLockBadInput(t, newLocker, opts) })
		t.Run("TryAcquireHeld", func(t *testing.T) { distlocktest.MultiLockTryAcquireHeld(t, newLocker, opts) })
		t.Run("CancelMidSet", func(t *testing.T) { distlocktest.MultiLockCancelMidSet(t, newLocker, opts) })
		t.Run("Fencing", func(t *testing.T) { distlocktest.MultiLockFencing(t, newLocker, opts) })
	})
}

// TestOverlap runs the overlap check (8 clients, random overlapping sets
// of 6 keys) on every backend for -multilock.duration.
func TestOverlap(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, backend string, newLocker distlocktest.NewLocker) {
		distlocktest.MultiLockOverlap(t, newLocker, distlocktest.Options{}, *overlapDuration)
	})
}

// TestCallerOrderDeadlocks shows why multilock takes keys in canonical
// order, on every backend. Two clients lock {a, b} and {b, a}.
//
// "caller order": each takes its keys in the order given, one key at a
// time with Locker.Acquire; a barrier after the first key makes both hold
// it. Each then waits for its second key — the other's first — and both
// are still waiting when their contexts end after a second: a deadlock
// (which, with TTL locks, lasts until a lease expires and then breaks
// exclusion; on ZooKeeper, for as long as both sessions live).
//
// "canonical order": the same two sets with multilock.Acquire, started
// together round after round, complete every time: both sets begin with
// a, so one client waits for the other's whole set, never half of it.
func TestCallerOrderDeadlocks(t *testing.T) {
	const stuckFor = time.Second
	backendtest.Each(t, func(t *testing.T, backend string, newLocker distlocktest.NewLocker) {
		lockers := []distlock.Locker{newLocker(t), newLocker(t)}
		base := distlocktest.Key(t)
		a, b := base+"/a", base+"/b"
		orders := [][]string{{a, b}, {b, a}}
		opts := &distlock.Options{TTL: time.Minute}

		t.Run("caller order", func(t *testing.T) {
			var barrier sync.WaitGroup
			barrier.Add(2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, keys := range orders {
				wg.Go(func() {
					first, err := lockers[i].Acquire(t.Context(), keys[0], opts)
					barrier.Done()
					if err != nil {
						errs[i] = fmt.Errorf("first key: %w", err)
						return
					}
					defer first.Release(context.Background())
					barrier.Wait() // both hold their first key
					ctx, cancel := context.WithTimeout(t.Context(), stuckFor)
					defer cancel()
					second, err := lockers[i].Acquire(ctx, keys[1], opts)
					if err == nil {
						_ = second.Release(context.Background())
						return
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for i, err := range errs {
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, distlock.ErrNotAcquired) {
					t.Errorf("client %d (%q): second key = %v, want stuck until its context ended (DeadlineExceeded)", i, orders[i], err)
				}
			}
			if !t.Failed() {
				t.Logf("both clients held one key and waited %v for the other's: deadlocked", stuckFor)
			}
		})

		t.Run("canonical order", func(t *testing.T) {
			const rounds = 10
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			for round := range rounds {
				var start, wg sync.WaitGroup
				start.Add(1)
				for i, keys := range orders {
					wg.Go(func() {
						start.Wait()
						s, err := multilock.Acquire(ctx, lockers[i], keys, opts)
						if err != nil {
							t.Errorf("round %d, client %d (%q): %v", round, i, keys, err)
							return
						}
						if got := s.Keys(); !slices.Equal(got, []string{a, b}) {
							t.Errorf("Keys() = %q, want [a b]", got)
						}
						if err := s.Release(context.Background()); err != nil {
							t.Errorf("Release: %v", err)
						}
					})
				}
				start.Done()
				wg.Wait()
				if t.Failed() {
					return
				}
			}
		})
	})
}

// ---- Unit tests on an in-memory Locker: the fault model ----

// fakeLocker is an in-memory Locker that records what multilock asks of
// it and fails, blocks or loses leases on demand.
type fakeLocker struct {
	mu    sync.Mutex
	next  fenced.Token
	held  map[string]*fakeLease
	calls []string // "acquire k", "try k", "extend k", "release k"
	// fail: Acquire and TryAcquire of the key return this error.
	fail map[string]error
	// block: Acquire of the key waits until its context ends, after
	// closing the channel (Acquire reached the key).
	block map[string]chan struct{}
	// onAcquire runs before Acquire of a key (without fl.mu).
	onAcquire func(key string)
	// releaseErr: Release of the key's lease returns this error.
	releaseErr map[string]error
	// releases records the context each Release got, per key.
	releases map[string]releaseCall
}

type releaseCall struct {
	ctxErr   error
	deadline time.Duration // until the context's deadline, at the call
	ok       bool          // the context had a deadline
}

func newFake() *fakeLocker {
	return &fakeLocker{held: map[string]*fakeLease{}, fail: map[string]error{}, block: map[string]chan struct{}{},
		releaseErr: map[string]error{}, releases: map[string]releaseCall{}}
}

func (fl *fakeLocker) record(format string, args ...any) {
	fl.calls = append(fl.calls, fmt.Sprintf(format, args...))
}

func (fl *fakeLocker) Calls() []string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.calls)
}

func (fl *fakeLocker) Acquire(ctx context.Context, key string, _ *distlock.Options) (distlock.Lease, error) {
	if fl.onAcquire != nil {
		fl.onAcquire(key)
	}
	fl.mu.Lock()
	fl.record("acquire %s", key)
	reached, blocks := fl.block[key]
	fl.mu.Unlock()
	if blocks {
		close(reached)
		<-ctx.Done()
		return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
	}
	return fl.take(key, false)
}

func (fl *fakeLocker) TryAcquire(_ context.Context, key string, _ *distlock.Options) (distlock.Lease, error) {
	fl.mu.Lock()
	fl.record("try %s", key)
	fl.mu.Unlock()
	return fl.take(key, true)
}

func (fl *fakeLocker) take(key string, try bool) (distlock.Lease, error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if err := fl.fail[key]; err != nil {
		return nil, err
	}
	if _, held := fl.held[key]; held && try {
		return nil, distlock.ErrNotAcquired
	}
	fl.next++
	l := &fakeLease{fl: fl, key: key, token: fl.next}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	fl.held[key] = l
	return l, nil
}

// lose makes the lease of key lose its lock with cause.
func (fl *fakeLocker) lose(key string, cause error) {
	fl.mu.Lock()
	l := fl.held[key]
	delete(fl.held, key)
	fl.mu.Unlock()
	l.cancel(cause)
}

type fakeLease struct {
	fl     *fakeLocker
	key    string
	token  fenced.Token
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	expired  bool // by the clock: Valid notices before any timer
	released bool
}

func (l *fakeLease) Key() string                 { return l.key }
func (l *fakeLease) Token() fenced.Token         { return l.token }
func (l *fakeLease) Context() context.Context    { return l.ctx }
func (l *fakeLease) Deadline() (time.Time, bool) { return time.Time{}, false }

// expire makes the lease expire by the clock: Valid notices it, no timer
// ends its context.
func (l *fakeLease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expired = true
}

// Valid marks an expired lease lost, as distlock.Lease.Valid does.
func (l *fakeLease) Valid() bool {
	l.mu.Lock()
	expired := l.expired
	l.mu.Unlock()
	if expired {
		l.cancel(fmt.Errorf("%w: expired", distlock.ErrLeaseLost))
	}
	return l.ctx.Err() == nil
}

func (l *fakeLease) Extend(context.Context, time.Duration) error {
	l.fl.mu.Lock()
	l.fl.record("extend %s", l.key)
	l.fl.mu.Unlock()
	if !l.Valid() {
		return distlock.ErrLeaseLost
	}
	return nil
}

func (l *fakeLease) Release(ctx context.Context) error {
	l.mu.Lock()
	again := l.released
	l.released = true
	l.mu.Unlock()
	if again {
		return nil
	}
	lost := !l.Valid()
	l.cancel(distlock.ErrReleased)
	fl := l.fl
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.record("release %s", l.key)
	dl, ok := ctx.Deadline()
	fl.releases[l.key] = releaseCall{ctxErr: ctx.Err(), deadline: time.Until(dl), ok: ok}
	if fl.held[l.key] == l {
		delete(fl.held, l.key)
	}
	if err := fl.releaseErr[l.key]; err != nil {
		return err
	}
	if lost {
		return fmt.Errorf("release: %w", context.Cause(l.ctx))
	}
	return nil
}

var (
	errBoom        = errors.New("backend: connection reset")
	errUnconfirmed = &concurkit.AmbiguousCommitError{Err: errors.New("cleanup timed out")}
)

func TestCanonicalOrder(t *testing.T) {
	fl := newFake()
	s, err := multilock.Acquire(t.Context(), fl, []string{"c", "a", "b", "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := s.Keys()
	if !slices.Equal(keys, []string{"a", "b", "c"}) {
		t.Fatalf("Keys() = %q, want [a b c]", keys)
	}
	keys[0] = "z"
	if s.Keys()[0] != "a" {
		t.Fatal("Keys() returned the set's own slice")
	}
	for _, k := range []string{"a", "b", "c"} {
		if l := s.Lease(k); l == nil || l.Key() != k || s.Token(k) != l.Token() || !s.Token(k).Valid() {
			t.Errorf("key %q: lease %v token %d", k, l, s.Token(k))
		}
	}
	if s.Lease("z") != nil || s.Token("z") != 0 {
		t.Errorf("a key not in the set: lease %v token %d, want nil and 0", s.Lease("z"), s.Token("z"))
	}
	if !s.Valid() || s.Context().Err() != nil {
		t.Fatal("a fresh set is not valid")
	}
	if _, ok := s.Deadline(); ok {
		t.Error("Deadline ok with no lease deadline")
	}
	if err := s.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"acquire a", "acquire b", "acquire c", "release c", "release b", "release a"}
	if got := fl.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if c := context.Cause(s.Context()); !errors.Is(c, distlock.ErrReleased) {
		t.Errorf("cause after Release = %v, want ErrReleased", c)
	}
	if s.Valid() {
		t.Error("released set still Valid")
	}
	if err := s.Release(t.Context()); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
}

func TestBadInputBeforeAnyCall(t *testing.T) {
	fl := newFake()
	for _, tc := range []struct {
		name string
		l    distlock.Locker
		keys []string
		opts *distlock.Options
		want error
	}{
		{"nil locker", nil, []string{"a"}, nil, concurkit.ErrInvalidArgument},
		{"typed-nil locker", (*fakeLocker)(nil), []string{"a"}, nil, concurkit.ErrInvalidArgument},
		{"nil keys", fl, nil, nil, concurkit.ErrInvalidArgument},
		{"empty key", fl, []string{"b", "", "a"}, nil, distlock.ErrInvalidKey},
		{"negative TTL", fl, []string{"a"}, &distlock.Options{TTL: -1}, concurkit.ErrInvalidArgument},
	} {
		for name, acquire := range map[string]func(context.Context, distlock.Locker, []string, *distlock.Options) (*multilock.Set, error){
			"Acquire": multilock.Acquire, "TryAcquire": multilock.TryAcquire,
		} {
			if s, err := acquire(t.Context(), tc.l, tc.keys, tc.opts); s != nil || !errors.Is(err, tc.want) || !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("%s %s = (%v, %v), want %v", name, tc.name, s, err, tc.want)
			}
		}
	}
	if calls := fl.Calls(); len(calls) != 0 {
		t.Errorf("bad input reached the Locker: %q", calls)
	}
}

// checkRollback fails the test unless the calls after the acquisitions
// are the releases of want, in that order, each with a context that was
// not done and ends within distlock.DefaultCleanupTimeout.
func checkRollback(t *testing.T, fl *fakeLocker, acquired []string, want ...string) {
	t.Helper()
	calls := fl.Calls()
	var releases []string
	for _, c := range calls {
		if k, ok := strings.CutPrefix(c, "release "); ok {
			releases = append(releases, k)
		}
	}
	if !slices.Equal(releases, want) {
		t.Errorf("rollback released %q, want %q (calls %q)", releases, want, calls)
	}
	for _, k := range want {
		r := fl.releases[k]
		if r.ctxErr != nil || !r.ok || r.deadline <= 0 || r.deadline > distlock.DefaultCleanupTimeout {
			t.Errorf("release %q: context err %v, deadline %v in %v: want a live context bounded by DefaultCleanupTimeout", k, r.ctxErr, r.ok, r.deadline)
		}
	}
	for _, c := range calls {
		if k, ok := strings.CutPrefix(c, "acquire "); ok && !slices.Contains(acquired, k) {
			t.Errorf("Acquire called for %q after the failure (calls %q)", k, calls)
		}
	}
	if len(fl.held) != 0 {
		t.Errorf("left held: %v", fl.held)
	}
}

// TestBackendErrorRollsBack: the backend fails on the third key: the
// first two are released, in reverse order, the fourth never tried; the
// error wraps the backend's and names the key.
func TestBackendErrorRollsBack(t *testing.T) {
	for name, acquire := range map[string]func(context.Context, distlock.Locker, []string, *distlock.Options) (*multilock.Set, error){
		"Acquire": multilock.Acquire, "TryAcquire": multilock.TryAcquire,
	} {
		t.Run(name, func(t *testing.T) {
			fl := newFake()
			fl.fail["c"] = errBoom
			s, err := acquire(t.Context(), fl, []string{"d", "c", "b", "a"}, nil)
			if s != nil || !errors.Is(err, errBoom) || !strings.Contains(err.Error(), `"c" (key 3 of 4)`) {
				t.Fatalf("(%v, %v), want the backend's error for key c", s, err)
			}
			checkRollback(t, fl, []string{"a", "b", "c"}, "b", "a")
		})
	}
}

// TestTryAcquireHeldRollsBack: the third key is held: ErrNotAcquired, and
// the first two are released.
func TestTryAcquireHeldRollsBack(t *testing.T) {
	fl := newFake()
	if _, err := fl.TryAcquire(t.Context(), "c", nil); err != nil {
		t.Fatal(err)
	}
	s, err := multilock.TryAcquire(t.Context(), fl, []string{"a", "b", "c", "d"}, nil)
	if s != nil || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("(%v, %v), want ErrNotAcquired", s, err)
	}
	calls := fl.Calls()
	want := []string{"try c", "try a", "try b", "try c", "release b", "release a"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
}

// TestContextEndsOnThirdKey: the caller's context ends (cancelled, or its
// deadline passes) while Acquire waits for the third key: the first two
// are released with a context the caller's end did not cancel, and the
// error matches ctx.Err() and ErrNotAcquired.
func TestContextEndsOnThirdKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(parent context.Context) (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", context.WithCancel, context.Canceled},
		{"deadline", func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, 50*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFake()
			reached := make(chan struct{})
			fl.block["c"] = reached
			ctx, cancel := tc.ctx(t.Context())
			defer cancel()
			go func() {
				<-reached
				if tc.want == context.Canceled {
					cancel()
				}
			}()
			s, err := multilock.Acquire(ctx, fl, []string{"d", "c", "b", "a"}, nil)
			if s != nil || !errors.Is(err, tc.want) || !errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("(%v, %v), want %v and ErrNotAcquired", s, err, tc.want)
			}
			checkRollback(t, fl, []string{"a", "b", "c"}, "b", "a")
		})
	}
}

// TestRollbackFailureJoined: a release of the rollback that fails is
// joined to the error; every release is attempted; a release that reports
// the lease lost is not a failure (the key is not held).
func TestRollbackFailureJoined(t *testing.T) {
	fl := newFake()
	fl.fail["d"] = errBoom
	fl.releaseErr["a"] = errUnconfirmed
	fl.releaseErr["b"] = fmt.Errorf("gone: %w", distlock.ErrLeaseLost)
	s, err := multilock.Acquire(t.Context(), fl, []string{"a", "b", "c", "d"}, nil)
	if s != nil || !errors.Is(err, errBoom) || !errors.Is(err, concurkit.ErrOutcomeUnknown) {
		t.Fatalf("(%v, %v), want the backend's error joined with the unconfirmed release", s, err)
	}
	if errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("error %v reports the lost lease of the rollback as a failure", err)
	}
	if !strings.Contains(err.Error(), `rollback: release "a"`) {
		t.Errorf("error %q does not name the key whose release failed", err)
	}
	checkRollback(t, fl, []string{"a", "b", "c", "d"}, "c", "b", "a")
}

// TestLeaseLostWhileWaiting: the first key's lease is lost while Acquire
// waits for the third: the wait ends, the set is given up (ErrNotAcquired
// and the loss, not a context error: the caller cancelled nothing).
func TestLeaseLostWhileWaiting(t *testing.T) {
	fl := newFake()
	reached := make(chan struct{})
	fl.block["c"] = reached
	go func() {
		<-reached
		fl.lose("a", fmt.Errorf("%w: session expired", distlock.ErrLeaseLost))
	}()
	// The deadline only bounds a wait that the loss fails to end.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := multilock.Acquire(ctx, fl, []string{"a", "b", "c"}, nil)
	if s != nil || !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("(%v, %v), want ErrNotAcquired and ErrLeaseLost", s, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the wait ended at its deadline, not when the lease was lost: %v", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("error %v matches context.Canceled: the caller cancelled nothing", err)
	}
	if !strings.Contains(err.Error(), `lease of "a" ended`) {
		t.Errorf("error %q does not name the lost key", err)
	}
	checkRollback(t, fl, []string{"a", "b", "c"}, "b", "a")
}

// TestLeaseExpiredDuringAcquire: the first lease expires by the clock
// (its timer has not fired) while the second key is acquired: Acquire
// checks Valid before returning, and gives the set up.
func TestLeaseExpiredDuringAcquire(t *testing.T) {
	fl := newFake()
	fl.onAcquire = func(key string) {
		if key == "b" {
			fl.mu.Lock()
			a := fl.held["a"]
			fl.mu.Unlock()
			a.expire()
		}
	}
	s, err := multilock.Acquire(t.Context(), fl, []string{"a", "b"}, nil)
	if s != nil || !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("(%v, %v), want ErrNotAcquired and ErrLeaseLost", s, err)
	}
	checkRollback(t, fl, []string{"a", "b"}, "b", "a")
}

// TestContextEndsWithLostLease: a lease of a held set is lost: the set's
// Context ends with that lease's cause (naming the key), Valid is false,
// and Release still releases every lease, reporting the loss.
func TestContextEndsWithLostLease(t *testing.T) {
	fl := newFake()
	s, err := multilock.Acquire(t.Context(), fl, []string{"a", "b", "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cause := fmt.Errorf("%w: taken over", distlock.ErrLeaseLost)
	fl.lose("b", cause)
	select {
	case <-s.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the set's context did not end when a lease was lost")
	}
	if c := context.Cause(s.Context()); !errors.Is(c, cause) || !strings.Contains(c.Error(), `"b"`) {
		t.Errorf("cause %v, want the lost lease's, naming b", c)
	}
	if s.Valid() {
		t.Error("Valid with a lost lease")
	}
	err = s.Release(t.Context())
	if !errors.Is(err, distlock.ErrLeaseLost) || !strings.Contains(err.Error(), `release "b"`) {
		t.Errorf("Release = %v, want ErrLeaseLost for b", err)
	}
	if c := context.Cause(s.Context()); !errors.Is(c, cause) {
		t.Errorf("cause after Release %v, want still the loss", c)
	}
	checkReleased(t, fl, "c", "b", "a")
}

func checkReleased(t *testing.T, fl *fakeLocker, want ...string) {
	t.Helper()
	var got []string
	for _, c := range fl.Calls() {
		if k, ok := strings.CutPrefix(c, "release "); ok {
			got = append(got, k)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("released %q, want %q", got, want)
	}
}

// TestValidEndsContext: a lease expired by the clock, before its timer
// fired: Valid returns false and the set's Context is done at once.
func TestValidEndsContext(t *testing.T) {
	fl := newFake()
	s, err := multilock.Acquire(t.Context(), fl, []string{"a", "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(t.Context())
	s.Lease("b").(*fakeLease).expire()
	if s.Valid() {
		t.Fatal("Valid with an expired lease")
	}
	if c := context.Cause(s.Context()); !errors.Is(c, distlock.ErrLeaseLost) {
		t.Errorf("right after Valid: cause %v, want ErrLeaseLost", c)
	}
}

// TestExtendAndReleaseJoinErrors: Extend and Release attempt every lease
// and join the errors, each naming its key.
func TestExtendAndReleaseJoinErrors(t *testing.T) {
	fl := newFake()
	s, err := multilock.Acquire(t.Context(), fl, []string{"a", "b", "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Extend(t.Context(), -time.Second); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Extend(-1s) = %v, want ErrInvalidArgument", err)
	}
	if err := s.Extend(t.Context(), 0); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	fl.lose("a", distlock.ErrLeaseLost)
	err = s.Extend(t.Context(), time.Second)
	if !errors.Is(err, distlock.ErrLeaseLost) || !strings.Contains(err.Error(), `extend "a"`) {
		t.Errorf("Extend with a lost lease = %v, want ErrLeaseLost naming a", err)
	}
	fl.releaseErr["b"] = errUnconfirmed
	err = s.Release(t.Context())
	if !errors.Is(err, concurkit.ErrOutcomeUnknown) || !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Release = %v, want b's unconfirmed release joined with a's loss", err)
	}
	var extends []string
	for _, c := range fl.Calls() {
		if k, ok := strings.CutPrefix(c, "extend "); ok {
			extends = append(extends, k)
		}
	}
	if want := []string{"a", "b", "c", "a", "b", "c"}; !slices.Equal(extends, want) {
		t.Errorf("extended %q, want %q", extends, want)
	}
	checkReleased(t, fl, "c", "b", "a")
}

// nilLocker returns neither a lease nor an error.
type nilLocker struct{ distlock.Locker }

func (nilLocker) Acquire(context.Context, string, *distlock.Options) (distlock.Lease, error) {
	return nil, nil
}

func TestLockerReturnsNothing(t *testing.T) {
	s, err := multilock.Acquire(t.Context(), nilLocker{}, []string{"a"}, nil)
	if s != nil || err == nil || !strings.Contains(err.Error(), "neither a lease nor an error") {
		t.Fatalf("(%v, %v), want an error", s, err)
	}
}
