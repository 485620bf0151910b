package distlocktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/election"
	"github.com/concurkit/concurkit/fenced"
)

// Options adapt the suite to a Locker. The zero value runs every test with
// the defaults, which suit a lock service on the local network.
type Options struct {
	// TTL of the leases in the tests that must not expire. Zero: 10s.
	TTL time.Duration
	// ShortTTL of the leases that are made to expire (Kleppmann scenario,
	// expired release, auto-extend, hooks). Zero: 1s. Lockers with a
	// coarser unit (etcd: whole seconds; ZooKeeper: session timeout) pass
	// theirs.
	ShortTTL time.Duration
	// Goroutines and Sections size the mutual-exclusion test. Zero: 16
	// goroutines × 50 critical sections (800 handovers, each contended by
	// up to 15 waiters). Slow backends may pass less; the test fails only
	// when no section completes for WaitTimeout, so a slow machine makes
	// it slower, never red.
	Goroutines, Sections int
	// Lockers is how many Locker instances the mutual-exclusion
	// goroutines share (goroutine i uses locker i mod Lockers). Zero: 4.
	Lockers int
	// Expire makes the lock of l lose its hold on the server as if its
	// holder were paused past its TTL or session: sleep past the TTL,
	// expire the ZooKeeper session, terminate the PostgreSQL backend. It
	// returns when another Locker can acquire the key or soon will (the
	// suite's Acquire calls wait); other Lockers may be waiting for the
	// key meanwhile. Whatever the fault, the suite asserts that a
	// successor's Acquire returns only after l ended locally (l.Valid()
	// false, l.Context() done). Nil: wait until l.Context() is done
	// (local validity over); the server releases the key at its TTL.
	Expire func(t *testing.T, l distlock.Lease)
	// LossBound is how long after a successor acquired the key the
	// previous holder's lease may still look valid. Zero (the default, and
	// the contract of every lease whose lock ends by time): not at all —
	// the lease must have ended locally before the server could hand the
	// lock over. Set it for an Expire fault that frees the lock on the
	// server before the holder can know, such as a PostgreSQL session
	// terminated by the server: the holder learns of it from its closed
	// connection, a moment later, and the lease must then end within the
	// backend's documented bound. Give the faulted leases a ShortTTL longer
	// than LossBound, so that only that notice, not the TTL, can end them
	// in time.
	LossBound time.Duration
	// NoExpiry says the Locker cannot take a lock from a paused holder;
	// the tests that need Expire are skipped.
	NoExpiry bool
	// NoHooks says the Locker does not report to observe.Hooks; the Hooks
	// test is skipped. (concurkit's backends all report.)
	NoHooks bool
	// Store returns the storage written in the Kleppmann scenario. Nil:
	// PostgresStore on a fresh schema of the test PostgreSQL
	// (testkit.Postgres: CONCURKIT_POSTGRES_URL, else the scripts' default
	// port; the test is skipped, or fails with CI=true, if there is none).
	Store func(t *testing.T) Store
	// Board returns the election board of the Election suite. Nil: an
	// electionpg.Board on a fresh schema of the test PostgreSQL.
	Board func(t *testing.T) election.Board
	// WaitTimeout bounds every blocking Acquire (a guard against hangs,
	// not a speed assertion). Zero: 30s.
	WaitTimeout time.Duration
	// Goleak are extra options for goleak.VerifyNone (library goroutines
	// that outlive a closed client by design).
	Goleak []goleak.Option
}

func (o Options) withDefaults() Options {
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.ShortTTL == 0 {
		o.ShortTTL = time.Second
	}
	if o.Goroutines == 0 {
		o.Goroutines = 16
	}
	if o.Sections == 0 {
		o.Sections = 50
	}
	if o.Lockers == 0 {
		o.Lockers = 4
	}
	if o.Expire == nil {
		o.Expire = waitExpired
	}
	if o.Store == nil {
		o.Store = func(t *testing.T) Store { return PostgresStore(t, postgres(t)) }
	}
	if o.Board == nil {
		o.Board = PostgresBoard
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = 30 * time.Second
	}
	return o
}

// NewLocker returns a Locker for one test; it registers its own cleanup
// (closing clients) with t. Each call returns an independent instance, as
// another process would have: the suite uses several at once, so they must
// share the lock service (and, for lockers that take tokens from a
// fenced.Source, one source).
type NewLocker func(t *testing.T) distlock.Locker

// waitExpired is the default Expire: the holder is paused until its lease
// context reports the end of its validity.
func waitExpired(t *testing.T, l distlock.Lease) {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(time.Minute):
		t.Fatal("locktest: lease did not expire within a minute")
	}
}

// Run runs the whole conformance suite as subtests of t, one per test
// function of this package (named after it), each with Lockers of its own
// from newLocker. Run one of them with go test -run 'YourTest/Name'; the
// functions are exported so that a test can also run one with other
// Options (another Expire fault, another Store).
func Run(t *testing.T, newLocker NewLocker, opts Options) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewLocker, Options)
	}{
		{"BadInput", BadInput},
		{"TryAcquireHeld", TryAcquireHeld},
		{"TokensIncrease", TokensIncrease},
		{"ContextAfterRelease", ContextAfterRelease},
		{"Extend", Extend},
		{"CancelWhileWaiting", CancelWhileWaiting},
		{"Close", Close},
		{"MutualExclusion", MutualExclusion},
		{"HandoverAfterLocalExpiry", HandoverAfterLocalExpiry},
		{"ReleaseExpiredKeepsSuccessor", ReleaseExpiredKeepsSuccessor},
		{"AutoExtend", AutoExtend},
		{"Hooks", Hooks},
		{"Kleppmann", Kleppmann},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLocker, opts) })
	}
}

// setup applies defaults and registers the goroutine-leak check, which
// runs after every other cleanup of the test (so after the Lockers were
// closed: see closing).
func setup(t *testing.T, opts Options) Options {
	t.Helper()
	o := opts.withDefaults()
	leakOpts := append([]goleak.Option{goleak.IgnoreCurrent()}, o.Goleak...)
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	return o
}

// closing returns newLocker, made to close each Locker that implements
// distlock.Closer when the test ends, waiting for its background
// cleanups, before the goroutine-leak check: what a Locker leaves running
// is waited for through its API, not by hoping it finished.
func closing(newLocker NewLocker) NewLocker {
	return func(t *testing.T) distlock.Locker {
		l := newLocker(t)
		if c, ok := l.(distlock.Closer); ok {
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := c.Close(ctx); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		return l
	}
}

// closeNow closes l, if it is a distlock.Closer, and fails the test
// unless Close returns nil within WaitTimeout.
func closeNow(t *testing.T, o Options, l distlock.Locker) {
	t.Helper()
	c, ok := l.(distlock.Closer)
	if !ok {
		return
	}
	if err := c.Close(o.waitCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// Key returns a lock key unique to this test run:
// "locktest/<test name>/<random>".
func Key(t *testing.T) string {
	return fmt.Sprintf("locktest/%s/%d", t.Name(), rand.Uint32())
}

func (o Options) waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), o.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, o Options, l distlock.Locker, key string, lo *distlock.Options) distlock.Lease {
	t.Helper()
	lease, err := l.Acquire(o.waitCtx(t), key, lo)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	if lease.Key() != key || !lease.Token().Valid() {
		t.Fatalf("lease key %q token %d, want key %q and a positive token", lease.Key(), lease.Token(), key)
	}
	return lease
}

func release(t *testing.T, l distlock.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// BadInput: empty key → ErrInvalidKey, negative TTL → an error matching
// concurkit.ErrInvalidArgument (as ErrInvalidKey does), for Acquire and
// TryAcquire; nil options mean the defaults.
func BadInput(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l := newLocker(t)
	ctx := o.waitCtx(t)
	for _, tc := range []struct {
		name string
		key  string
		opts *distlock.Options
		want error
	}{
		{"empty key", "", nil, distlock.ErrInvalidKey},
		{"empty key with options", "", &distlock.Options{TTL: o.TTL}, distlock.ErrInvalidKey},
		{"empty key is bad input", "", nil, concurkit.ErrInvalidArgument},
		{"negative TTL", Key(t), &distlock.Options{TTL: -time.Second}, concurkit.ErrInvalidArgument},
	} {
		for name, acquire := range map[string]func(context.Context, string, *distlock.Options) (distlock.Lease, error){
			"Acquire": l.Acquire, "TryAcquire": l.TryAcquire,
		} {
			lease, err := acquire(ctx, tc.key, tc.opts)
			if !errors.Is(err, tc.want) || lease != nil {
				t.Errorf("%s %s: (%v, %v), want (nil, %v)", name, tc.name, lease, err, tc.want)
			}
		}
	}
	// nil options: the defaults.
	lease, err := l.TryAcquire(ctx, Key(t), nil)
	if err != nil {
		t.Fatalf("TryAcquire with nil options: %v", err)
	}
	release(t, lease)
}

// TryAcquireHeld: TryAcquire on a held key fails at once with
// ErrNotAcquired (not a context error: it did not wait), from the same
// and from another Locker; after Release it succeeds.
func TryAcquireHeld(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l1, l2 := newLocker(t), newLocker(t)
	key := Key(t)
	held := mustAcquire(t, o, l1, key, &distlock.Options{TTL: o.TTL})
	for name, l := range map[string]distlock.Locker{"same locker": l1, "other locker": l2} {
		lease, err := l.TryAcquire(o.waitCtx(t), key, &distlock.Options{TTL: o.TTL})
		if !errors.Is(err, distlock.ErrNotAcquired) || lease != nil {
			t.Fatalf("%s: TryAcquire on a held key = (%v, %v), want ErrNotAcquired", name, lease, err)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Fatalf("%s: TryAcquire waited for its context: %v", name, err)
		}
	}
	if err := held.Context().Err(); err != nil {
		t.Fatalf("a failed TryAcquire disturbed the holder: %v", context.Cause(held.Context()))
	}
	release(t, held)
	next, err := l2.TryAcquire(o.waitCtx(t), key, &distlock.Options{TTL: o.TTL})
	if err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	if next.Token() <= held.Token() {
		t.Fatalf("token %d after %d", next.Token(), held.Token())
	}
	release(t, next)
}

// TokensIncrease: consecutive acquisitions of a key, alternating between
// two Lockers, get strictly increasing tokens.
func TokensIncrease(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	lockers := []distlock.Locker{newLocker(t), newLocker(t)}
	key := Key(t)
	var last fenced.Token
	for i := range 10 {
		lease := mustAcquire(t, o, lockers[i%2], key, &distlock.Options{TTL: o.TTL})
		if lease.Token() <= last {
			t.Fatalf("acquisition %d: token %d, previous %d", i, lease.Token(), last)
		}
		last = lease.Token()
		release(t, lease)
	}
}

// ContextAfterRelease: the lease context is cancelled by Release (cause
// ErrReleased) and Valid turns false; a second Release returns nil;
// Extend after Release is ErrLeaseLost.
func ContextAfterRelease(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l := newLocker(t)
	lease := mustAcquire(t, o, l, Key(t), &distlock.Options{TTL: o.TTL})
	if err := lease.Context().Err(); err != nil {
		t.Fatalf("fresh lease context already done: %v", context.Cause(lease.Context()))
	}
	if !lease.Valid() {
		t.Fatal("fresh lease not Valid")
	}
	release(t, lease)
	select {
	case <-lease.Context().Done():
	default:
		t.Fatal("lease context not cancelled by Release")
	}
	if lease.Valid() {
		t.Fatal("released lease still Valid")
	}
	if c := context.Cause(lease.Context()); !errors.Is(c, distlock.ErrReleased) || errors.Is(c, distlock.ErrLeaseLost) {
		t.Fatalf("cause after Release = %v, want ErrReleased", c)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	if err := lease.Extend(context.Background(), o.TTL); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Extend after Release = %v, want ErrLeaseLost", err)
	}
}

// Extend: a held lease can be extended, negative TTL is rejected, and the
// lease stays held; its Deadline, if it has one, never lies beyond the
// TTL from the start of the call that set it.
func Extend(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l1, l2 := newLocker(t), newLocker(t)
	key := Key(t)
	before := time.Now()
	lease := mustAcquire(t, o, l1, key, &distlock.Options{TTL: o.TTL})
	checkDeadline(t, lease, before, o.TTL)
	before = time.Now()
	if err := lease.Extend(o.waitCtx(t), o.TTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	checkDeadline(t, lease, before, o.TTL)
	if !lease.Valid() {
		t.Fatalf("extended lease not Valid: %v", context.Cause(lease.Context()))
	}
	if err := lease.Extend(o.waitCtx(t), -time.Second); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("Extend(-1s) = %v, want an error matching concurkit.ErrInvalidArgument", err)
	}
	if _, err := l2.TryAcquire(o.waitCtx(t), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire after Extend = %v, want ErrNotAcquired", err)
	}
	if err := lease.Context().Err(); err != nil {
		t.Fatalf("extended lease lost: %v", context.Cause(lease.Context()))
	}
	release(t, lease)
}

// CancelWhileWaiting: Acquire on a held key returns, once its context is
// cancelled, an error matching both context.Canceled and ErrNotAcquired;
// the abandoned wait leaves nothing behind: once the holder released and
// the waiter's Locker was closed (Close waits for the cleanup of a request
// that was in flight when the caller gave up, which the server may still
// apply), another Locker gets the key at once. An already-cancelled
// context fails the same way.
func CancelWhileWaiting(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l1, l2, l3 := newLocker(t), newLocker(t), newLocker(t)
	key := Key(t)
	held := mustAcquire(t, o, l1, key, &distlock.Options{TTL: o.TTL})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		lease, err := l2.Acquire(ctx, key, &distlock.Options{TTL: o.TTL})
		if lease != nil {
			_ = lease.Release(context.Background())
			err = fmt.Errorf("acquired a held key (token %d, holder %d)", lease.Token(), held.Token())
		}
		done <- err
	}()
	// Give the waiter time to start waiting on the server; correctness does
	// not depend on it (cancelling earlier must work the same).
	stop := time.AfterFunc(50*time.Millisecond, cancel)
	defer stop.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("cancelled Acquire = %v, want context.Canceled and ErrNotAcquired", err)
		}
	case <-time.After(o.WaitTimeout):
		t.Fatal("Acquire did not return after its context was cancelled")
	}

	cancelled, c2 := context.WithCancel(t.Context())
	c2()
	if lease, err := l2.Acquire(cancelled, key, nil); lease != nil || !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("Acquire with a cancelled context = (%v, %v)", lease, err)
	}
	if err := held.Context().Err(); err != nil {
		t.Fatalf("the holder lost its lease: %v", context.Cause(held.Context()))
	}
	release(t, held)
	closeNow(t, o, l2)
	next, err := l3.TryAcquire(o.waitCtx(t), key, &distlock.Options{TTL: o.TTL})
	if err != nil {
		t.Fatalf("TryAcquire after the holder released and the cancelled waiter's Locker closed (the waiter left state behind): %v", err)
	}
	release(t, next)
}

// Close (for a Locker that implements distlock.Closer): Close releases
// the leases still held (another Locker gets their keys at once), ends an
// Acquire that waits with an error matching ErrClosed and ErrNotAcquired,
// refuses later acquisitions the same way, returns nil, and returns nil
// again when called twice; goleak then finds nothing of the Locker left.
// A lease released before Close is not released twice (its Release
// reports nil, and Close's does not report ErrLeaseLost).
func Close(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l, other := newLocker(t), newLocker(t)
	c, ok := l.(distlock.Closer)
	if !ok {
		t.Skip("the Locker does not implement distlock.Closer")
	}
	held, releasedFirst, contended := Key(t), Key(t), Key(t)
	lease := mustAcquire(t, o, l, held, &distlock.Options{TTL: o.TTL})
	early := mustAcquire(t, o, l, releasedFirst, &distlock.Options{TTL: o.TTL})
	release(t, early)
	blocker := mustAcquire(t, o, other, contended, &distlock.Options{TTL: o.TTL})
	defer release(t, blocker)

	waiting := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		lz, err := l.Acquire(o.waitCtx(t), contended, &distlock.Options{TTL: o.TTL})
		if lz != nil {
			_ = lz.Release(context.Background())
			err = fmt.Errorf("acquired a held key (token %d)", lz.Token())
		}
		waiting <- err
	}()
	<-started
	// Give the Acquire time to start waiting on the server; the assertions
	// hold the same if Close comes first (no event tells when a wait began).
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(o.waitCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, distlock.ErrClosed) || !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("Acquire waiting when Close was called = %v, want ErrClosed and ErrNotAcquired", err)
		}
	case <-time.After(o.WaitTimeout):
		t.Fatal("Close returned but an Acquire of the Locker still waits")
	}
	if err := lease.Context().Err(); err == nil {
		t.Fatal("Close returned but the lease it released still has a live context")
	}
	next, err := other.TryAcquire(o.waitCtx(t), held, &distlock.Options{TTL: o.TTL})
	if err != nil {
		t.Fatalf("TryAcquire of a key whose holder's Locker was closed: %v (Close did not release it)", err)
	}
	release(t, next)
	if err := lease.Release(context.Background()); err != nil && !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release after Close = %v, want nil (or ErrLeaseLost)", err)
	}
	for name, acquire := range map[string]func(context.Context, string, *distlock.Options) (distlock.Lease, error){
		"Acquire": l.Acquire, "TryAcquire": l.TryAcquire,
	} {
		if lz, err := acquire(o.waitCtx(t), Key(t), nil); lz != nil || !errors.Is(err, distlock.ErrClosed) || !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("%s after Close = (%v, %v), want ErrClosed and ErrNotAcquired", name, lz, err)
		}
	}
	if err := c.Close(o.waitCtx(t)); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// MutualExclusion: Goroutines × Sections critical sections on one key; in
// each, a shared flag must flip false→true by CompareAndSwap (it fails if
// two holders overlap) and the token must exceed every earlier one.
func MutualExclusion(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	lockers := make([]distlock.Locker, min(o.Lockers, o.Goroutines))
	for i := range lockers {
		lockers[i] = newLocker(t)
	}
	key := Key(t)
	var (
		inside   atomic.Bool
		last     atomic.Int64
		sections atomic.Int64
		wg       sync.WaitGroup
		failed   = make(chan string, o.Goroutines)
	)
	// The work is bounded (Goroutines × Sections), not the wall clock: the
	// test fails only when no critical section completes for WaitTimeout
	// (a lock stuck with a holder that is gone, or a starved wait), however
	// slow the shared machine makes the whole run.
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	start := time.Now()
	go func() {
		tick := time.NewTicker(o.WaitTimeout / 10)
		defer tick.Stop()
		seen, since := int64(-1), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n := sections.Load(); n != seen {
				seen, since = n, time.Now()
			} else if time.Since(since) >= o.WaitTimeout {
				cancel(fmt.Errorf("no critical section completed for %v (%d of %d done)", o.WaitTimeout, n, o.Goroutines*o.Sections))
				return
			}
		}
	}()
	for g := range o.Goroutines {
		l := lockers[g%len(lockers)]
		wg.Go(func() {
			for range o.Sections {
				lease, err := l.Acquire(ctx, key, &distlock.Options{TTL: o.TTL})
				if err != nil {
					if c := context.Cause(ctx); c != nil && errors.Is(err, ctx.Err()) {
						err = fmt.Errorf("%w (%v)", err, c)
					}
					failed <- fmt.Sprintf("goroutine %d: Acquire: %v", g, err)
					cancel(nil)
					return
				}
				if !inside.CompareAndSwap(false, true) {
					failed <- fmt.Sprintf("goroutine %d: two holders inside the critical section (token %d)", g, lease.Token())
					cancel(nil)
					return
				}
				if prev := last.Swap(int64(lease.Token())); prev >= int64(lease.Token()) {
					failed <- fmt.Sprintf("goroutine %d: token %d not above the previous holder's %d", g, lease.Token(), prev)
					cancel(nil)
					return
				}
				runtime.Gosched() // let a second holder, if any, walk in
				sections.Add(1)
				inside.Store(false)
				if err := lease.Release(context.Background()); err != nil {
					failed <- fmt.Sprintf("goroutine %d: Release: %v", g, err)
					cancel(nil)
					return
				}
			}
		})
	}
	wg.Wait()
	close(failed)
	for msg := range failed {
		t.Error(msg)
	}
	t.Logf("%d critical sections in %v", sections.Load(), time.Since(start).Round(time.Millisecond))
	if got, want := sections.Load(), int64(o.Goroutines*o.Sections); got != want && !t.Failed() {
		t.Fatalf("%d critical sections, want %d", got, want)
	}
}

// ReleaseExpiredKeepsSuccessor: A's lease expires (Expire), B acquires;
// A's Release reports ErrLeaseLost and does not delete B's lock.
func ReleaseExpiredKeepsSuccessor(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Skip("backend cannot expire a paused holder")
	}
	la, lb, lc := newLocker(t), newLocker(t), newLocker(t)
	key := Key(t)
	a := mustAcquire(t, o, la, key, &distlock.Options{TTL: o.ShortTTL})
	o.Expire(t, a)
	b := mustAcquire(t, o, lb, key, &distlock.Options{TTL: o.TTL})
	checkEnded(t, o, a, "after the successor acquired")
	if b.Token() <= a.Token() {
		t.Fatalf("successor token %d not above %d", b.Token(), a.Token())
	}
	if err := a.Release(context.Background()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release of the expired lease = %v, want ErrLeaseLost", err)
	}
	if lease, err := lc.TryAcquire(o.waitCtx(t), key, &distlock.Options{TTL: o.TTL}); !errors.Is(err, distlock.ErrNotAcquired) {
		if lease != nil {
			_ = lease.Release(context.Background())
		}
		t.Fatalf("after the expired holder's Release, TryAcquire = %v: the successor's lock was deleted", err)
	}
	if err := b.Context().Err(); err != nil {
		t.Fatalf("successor lost its lease: %v", context.Cause(b.Context()))
	}
	release(t, b)
}

// AutoExtend: a lease with AutoExtend outlives several TTLs and keeps
// others out; Release stops the extender (goleak checks it is gone).
//
// A loaded machine can stall the extender past a short TTL: the lease
// then ends (its context, Valid) and the lock is free, which is the lease
// behaving as it must. Such a round is run again with twice the TTL, 3
// rounds at most. A lock another client takes while the holder's lease is
// still valid fails at once: that is a safety violation, not load.
func AutoExtend(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Skip("backend leases do not expire by time")
	}
	l1, l2 := newLocker(t), newLocker(t)
	ttl := o.ShortTTL
	for round := 1; ; round++ {
		err := autoExtendRound(t, o, l1, l2, fmt.Sprintf("%s-%d", Key(t), round), ttl)
		if err == nil {
			return
		}
		if round == 3 {
			t.Fatalf("round %d, TTL %v: %v", round, ttl, err)
		}
		t.Logf("round %d, TTL %v: %v; again with twice the TTL", round, ttl, err)
		ttl *= 2
	}
}

// autoExtendRound is one round of AutoExtend; it returns an error when the
// holder's lease ended (the extender fell behind) and fails t on anything
// else.
func autoExtendRound(t *testing.T, o Options, l1, l2 distlock.Locker, key string, ttl time.Duration) error {
	t.Helper()
	lease := mustAcquire(t, o, l1, key, &distlock.Options{TTL: ttl, AutoExtend: true})
	time.Sleep(2*ttl + ttl/2) // time passing is the point here
	if err := lease.Context().Err(); err != nil {
		_ = lease.Release(context.Background())
		return fmt.Errorf("auto-extended lease lost: %w", context.Cause(lease.Context()))
	}
	other, err := l2.TryAcquire(o.waitCtx(t), key, nil)
	switch {
	case errors.Is(err, distlock.ErrNotAcquired):
		release(t, lease)
		return nil
	case err != nil:
		_ = lease.Release(context.Background())
		t.Fatalf("TryAcquire on an auto-extended lease = %v, want ErrNotAcquired", err)
	}
	_ = other.Release(context.Background())
	// The lock was free: the holder's lease must have ended (within the
	// backend's LossBound), or it would believe it holds a lock another
	// client took.
	checkEnded(t, o, lease, "when another client took its lock")
	if t.Failed() {
		t.FailNow()
	}
	_ = lease.Release(context.Background())
	return fmt.Errorf("the lock was free after the holder's lease ended: %w", context.Cause(lease.Context()))
}

// checkDeadline fails the test if l has a Deadline later than ttl after
// before (taken just before the call that acquired or extended l): the
// lease would outlive the validity the caller asked for.
func checkDeadline(t *testing.T, l distlock.Lease, before time.Time, ttl time.Duration) {
	t.Helper()
	if dl, ok := l.Deadline(); ok && dl.After(before.Add(ttl)) {
		t.Errorf("Deadline() is %v after the request, beyond its TTL %v", dl.Sub(before), ttl)
	}
}

// checkEnded fails the test unless lease l has ended locally: Valid
// false, and then (Valid marks an expired lease lost at once) its context
// done with a cause matching ErrLeaseLost. With a LossBound, l may end
// within that bound instead. It may run in a goroutine other than the
// test's (it only reports with Errorf).
func checkEnded(t *testing.T, o Options, l distlock.Lease, when string) {
	t.Helper()
	if o.LossBound > 0 && l.Valid() {
		select {
		case <-l.Context().Done():
		case <-time.After(o.LossBound):
		}
		when = fmt.Sprintf("%s, after the loss bound %v", when, o.LossBound)
	}
	if l.Valid() {
		dl, ok := l.Deadline()
		t.Errorf("%s: the previous holder's lease is still Valid (deadline in %v, has deadline %v): its local validity outlives its lock on the server",
			when, time.Until(dl), ok)
		return
	}
	if l.Context().Err() == nil {
		t.Errorf("%s: Valid() is false but the lease context is not done", when)
	} else if c := context.Cause(l.Context()); !errors.Is(c, distlock.ErrLeaseLost) {
		t.Errorf("%s: the previous holder's context cause is %v, want ErrLeaseLost", when, c)
	}
}

// HandoverAfterLocalExpiry: holder A acquires with ShortTTL and stops
// (it does not extend; Expire applies the backend's fault, if any) while
// B waits in Acquire. When B's Acquire returns, A must have ended locally
// (Valid false, Context done, cause ErrLeaseLost): a lease whose local
// validity outlives the lock on the server lets two holders believe they
// hold it. A's Deadline must not lie beyond ShortTTL from its Acquire.
//
// The check is Valid, not Context().Err(): the context is cancelled by a
// timer, which fires late on a loaded machine, while Valid reads the
// clock; Valid marks the lease lost, so the context is then done.
func HandoverAfterLocalExpiry(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Skip("backend cannot expire a paused holder")
	}
	la, lb := newLocker(t), newLocker(t)
	key := Key(t)
	before := time.Now()
	a := mustAcquire(t, o, la, key, &distlock.Options{TTL: o.ShortTTL})
	checkDeadline(t, a, before, o.ShortTTL)
	type result struct {
		b   distlock.Lease
		err error
	}
	got := make(chan result, 1)
	ctx := o.waitCtx(t)
	go func() {
		b, err := lb.Acquire(ctx, key, &distlock.Options{TTL: o.TTL})
		if err == nil { // check A at once, while Expire may still run
			timerUp := a.Context().Err() != nil
			checkEnded(t, o, a, "when the successor's Acquire returned")
			if !timerUp && a.Context().Err() != nil {
				t.Logf("A's context was cancelled by Valid, before its timer fired (timer lag)")
			}
		}
		got <- result{b: b, err: err}
	}()
	o.Expire(t, a) // runs concurrently with B's wait
	r := <-got
	if r.err != nil {
		t.Fatalf("successor Acquire: %v", r.err)
	}
	defer release(t, r.b)
	if r.b.Token() <= a.Token() {
		t.Errorf("successor token %d not above %d", r.b.Token(), a.Token())
	}
	if err := a.Release(context.Background()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Release of the expired lease = %v, want ErrLeaseLost", err)
	}
}

// Kleppmann runs the scenario with fencing ("fenced") and without
// ("unfenced", the negative control that shows the lock alone is unsafe).
func Kleppmann(t *testing.T, newLocker NewLocker, opts Options) {
	t.Run("fenced", func(t *testing.T) { kleppmann(t, newLocker, opts, true) })
	t.Run("unfenced", func(t *testing.T) { kleppmann(t, newLocker, opts, false) })
}

// kleppmannRounds bounds the rounds of the Kleppmann scenario. A round
// stops the test early once it showed what it is after (the unfenced run
// an inversion, the fenced run a rejected late write), which is the first
// round most of the time: the late writer resumes at a random point
// within kleppmannJitter after the successor was granted the lock, while
// the successor writes at once.
const (
	kleppmannRounds = 8
	kleppmannJitter = 40 * time.Millisecond
)

// write is one write attempt of the Kleppmann scenario.
type write struct {
	token fenced.Token
	who   string
	err   error
}

func (w write) value() string { return fmt.Sprintf("%d %s", w.token, w.who) }

// kleppmann: in each round two holders take the lock in turn. A (either
// Locker, at random) acquires with ShortTTL and may write once while its
// lease is valid; then it is paused (Expire) until the lock has been
// handed over, plus a random delay, and writes again, unaware. B waits
// in Acquire, and writes as soon as it holds the lock. The test does not
// order A's late write and B's write: both run at once. Each write stores
// its token; an accepted write whose token is below that of a write
// accepted before it is an inversion, visible as a final value whose
// token is below the highest accepted one.
//
// Without fencing, at least one round must show an inversion (the lock
// alone does not protect storage); with fencing, no round may, and at
// least one late write must have been rejected with fenced.ErrStaleToken
// (else the scenario never tested anything).
func kleppmann(t *testing.T, newLocker NewLocker, opts Options, fencing bool) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Skip("backend cannot expire a paused holder")
	}
	store := o.Store(t)
	lockers := [2]distlock.Locker{newLocker(t), newLocker(t)}
	key := Key(t)
	do := func(ctx context.Context, w write) error {
		if fencing {
			return store.Write(ctx, w.token, w.value())
		}
		return store.WriteUnfenced(ctx, w.value())
	}
	var (
		inversions, rejected int
		history              []write // every attempt, in completion order
	)
	for round := 1; round <= kleppmannRounds; round++ {
		ctx := o.waitCtx(t)
		first := rand.IntN(2)
		la, lb := lockers[first], lockers[1-first]
		a := mustAcquire(t, o, la, key, &distlock.Options{TTL: o.ShortTTL})
		var accepted []write
		if rand.IntN(2) == 0 { // the pause hits after A's first write, or before it
			w := write{token: a.Token(), who: fmt.Sprintf("A%d-valid", round)}
			if w.err = do(ctx, w); w.err != nil {
				t.Fatalf("round %d: A's write while its lease is valid: %v", round, w.err)
			}
			accepted, history = append(accepted, w), append(history, w)
		}

		granted := make(chan distlock.Lease, 1)
		bWrote := make(chan write, 1)
		go func() { // holder B: waits, then writes as soon as it holds the lock
			b, err := lb.Acquire(ctx, key, &distlock.Options{TTL: o.TTL})
			if err != nil {
				close(granted)
				bWrote <- write{err: fmt.Errorf("B's Acquire: %w", err)}
				return
			}
			checkEnded(t, o, a, fmt.Sprintf("round %d: when B's Acquire returned", round))
			granted <- b
			w := write{token: b.Token(), who: fmt.Sprintf("B%d", round)}
			w.err = do(ctx, w)
			bWrote <- w
		}()

		o.Expire(t, a) // A is paused past its TTL / its session dies
		b, ok := <-granted
		if !ok {
			t.Fatal((<-bWrote).err)
		}
		if b.Token() <= a.Token() {
			t.Fatalf("round %d: B's token %d not above A's %d", round, b.Token(), a.Token())
		}
		// A resumes at a random point while B writes, unaware that it lost
		// the lock (the pause was longer than its lease).
		time.Sleep(rand.N(kleppmannJitter))
		late := write{token: a.Token(), who: fmt.Sprintf("A%d-late", round)}
		late.err = do(ctx, late)
		bw := <-bWrote

		history = append(history, late, bw) // completion order between these two is unknown
		if bw.err != nil {
			t.Fatalf("round %d: B's write (the current holder): %v", round, bw.err)
		}
		accepted = append(accepted, bw)
		switch {
		case late.err == nil:
			accepted = append(accepted, late)
		case fencing && errors.Is(late.err, fenced.ErrStaleToken):
			rejected++
		default:
			t.Fatalf("round %d: A's late write: %v", round, late.err)
		}
		final, err := store.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var finalToken fenced.Token
		if _, err := fmt.Sscanf(final, "%d", &finalToken); err != nil {
			t.Fatalf("round %d: stored value %q: %v", round, final, err)
		}
		var maxToken fenced.Token
		for _, w := range accepted {
			maxToken = max(maxToken, w.token)
		}
		if finalToken < maxToken {
			inversions++
			if fencing {
				t.Errorf("round %d: stored %q after a write with token %d was accepted: a stale holder's write landed after a newer holder's (history %v)",
					round, final, maxToken, history)
			}
		}
		_ = a.Release(context.Background()) // lost: ErrLeaseLost, B untouched
		release(t, b)
		if t.Failed() || (!fencing && inversions > 0) || (fencing && rejected > 0) {
			t.Logf("%d round(s): %d inversion(s), %d late write(s) rejected", round, inversions, rejected)
			break
		}
	}
	switch {
	case fencing && rejected == 0 && !t.Failed():
		t.Errorf("fenced: no late write reached storage after its successor's in %d rounds: the scenario tested nothing", kleppmannRounds)
	case !fencing && inversions == 0:
		t.Errorf("negative control: no stale write landed after a newer holder's in %d rounds; without fencing the lock alone should not protect storage (history %v)",
			kleppmannRounds, history)
	}
}
