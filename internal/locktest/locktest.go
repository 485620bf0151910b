package locktest

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

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
)

// Options adapt the suite to a backend. The zero value runs everything
// with the defaults.
type Options struct {
	// TTL of the leases in the tests that must not expire. Zero: 10s.
	TTL time.Duration
	// ShortTTL of the leases that are made to expire (Kleppmann scenario,
	// expired release, auto-extend). Zero: 1s. Backends with a coarser
	// unit (etcd: whole seconds; ZooKeeper: session timeout) pass theirs.
	ShortTTL time.Duration
	// Goroutines and Sections size the mutual-exclusion test. Zero: 16
	// goroutines × 200 critical sections. Slow backends may pass less.
	Goroutines, Sections int
	// Lockers is how many Locker instances the mutual-exclusion
	// goroutines share (goroutine i uses locker i mod Lockers). Zero: 4.
	Lockers int
	// Expire makes the lock of l lose its hold on the server as if its
	// holder were paused past its TTL or session: sleep past the TTL,
	// expire the ZooKeeper session, terminate the PostgreSQL backend. It
	// returns when another Locker can acquire the key or soon will (the
	// suite's Acquire calls wait). Nil: wait until l.Context() is done
	// (local validity over); the server releases the key at its TTL.
	Expire func(t *testing.T, l distlock.Lease)
	// NoExpiry says the backend cannot take a lock from a paused holder;
	// the tests that need Expire are skipped.
	NoExpiry bool
	// Store returns the storage written in the Kleppmann scenario. Nil:
	// PostgresStore on the test PostgreSQL.
	Store func(t *testing.T) Store
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
		o.Sections = 200
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
	if o.WaitTimeout == 0 {
		o.WaitTimeout = 30 * time.Second
	}
	return o
}

// NewLocker returns a Locker for one test; it registers its own cleanup
// (closing clients) with t. Each call returns an independent instance, as
// another process would have.
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

// Run runs the whole conformance suite as subtests.
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
		{"MutualExclusion", MutualExclusion},
		{"ReleaseExpiredKeepsSuccessor", ReleaseExpiredKeepsSuccessor},
		{"AutoExtend", AutoExtend},
		{"Kleppmann", Kleppmann},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLocker, opts) })
	}
}

// setup applies defaults and registers the goroutine-leak check, which
// runs after every other cleanup of the test.
func setup(t *testing.T, opts Options) Options {
	t.Helper()
	o := opts.withDefaults()
	leakOpts := append([]goleak.Option{goleak.IgnoreCurrent()}, o.Goleak...)
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	return o
}

// Key returns a key unique to this test run.
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

// BadInput: empty key → ErrInvalidKey, negative TTL → ErrInvalidOptions,
// for Acquire and TryAcquire; nil options mean the defaults.
func BadInput(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
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
		{"negative TTL", Key(t), &distlock.Options{TTL: -time.Second}, distlock.ErrInvalidOptions},
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

// ContextAfterRelease: the lease context is cancelled by Release; a
// second Release returns nil; Extend after Release is ErrLeaseLost.
func ContextAfterRelease(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	l := newLocker(t)
	lease := mustAcquire(t, o, l, Key(t), &distlock.Options{TTL: o.TTL})
	if err := lease.Context().Err(); err != nil {
		t.Fatalf("fresh lease context already done: %v", context.Cause(lease.Context()))
	}
	release(t, lease)
	select {
	case <-lease.Context().Done():
	default:
		t.Fatal("lease context not cancelled by Release")
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	if err := lease.Extend(context.Background(), o.TTL); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Extend after Release = %v, want ErrLeaseLost", err)
	}
}

// Extend: a held lease can be extended, negative TTL is rejected, and the
// lease stays held.
func Extend(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	l1, l2 := newLocker(t), newLocker(t)
	key := Key(t)
	lease := mustAcquire(t, o, l1, key, &distlock.Options{TTL: o.TTL})
	if err := lease.Extend(o.waitCtx(t), o.TTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := lease.Extend(o.waitCtx(t), -time.Second); !errors.Is(err, distlock.ErrInvalidOptions) {
		t.Fatalf("Extend(-1s) = %v, want ErrInvalidOptions", err)
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
// the abandoned wait leaves nothing behind (the key is free after the
// holder releases). An already-cancelled context fails the same way.
func CancelWhileWaiting(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	l1, l2 := newLocker(t), newLocker(t)
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
	next, err := l2.TryAcquire(o.waitCtx(t), key, &distlock.Options{TTL: o.TTL})
	if err != nil {
		t.Fatalf("TryAcquire after the holder released (a cancelled waiter left state behind?): %v", err)
	}
	release(t, next)
}

// MutualExclusion: Goroutines × Sections critical sections on one key; in
// each, a shared flag must flip false→true by CompareAndSwap (it fails if
// two holders overlap) and the token must exceed every earlier one.
func MutualExclusion(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
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
	ctx, cancel := context.WithTimeout(t.Context(), max(o.WaitTimeout, 90*time.Second))
	defer cancel()
	for g := range o.Goroutines {
		l := lockers[g%len(lockers)]
		wg.Go(func() {
			for range o.Sections {
				lease, err := l.Acquire(ctx, key, &distlock.Options{TTL: o.TTL})
				if err != nil {
					failed <- fmt.Sprintf("goroutine %d: Acquire: %v", g, err)
					cancel()
					return
				}
				if !inside.CompareAndSwap(false, true) {
					failed <- fmt.Sprintf("goroutine %d: two holders inside the critical section (token %d)", g, lease.Token())
					cancel()
					return
				}
				if prev := last.Swap(int64(lease.Token())); prev >= int64(lease.Token()) {
					failed <- fmt.Sprintf("goroutine %d: token %d not above the previous holder's %d", g, lease.Token(), prev)
					cancel()
					return
				}
				runtime.Gosched() // let a second holder, if any, walk in
				sections.Add(1)
				inside.Store(false)
				if err := lease.Release(context.Background()); err != nil {
					failed <- fmt.Sprintf("goroutine %d: Release: %v", g, err)
					cancel()
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
	if got, want := sections.Load(), int64(o.Goroutines*o.Sections); got != want && !t.Failed() {
		t.Fatalf("%d critical sections, want %d", got, want)
	}
}

// ReleaseExpiredKeepsSuccessor: A's lease expires (Expire), B acquires;
// A's Release reports ErrLeaseLost and does not delete B's lock.
func ReleaseExpiredKeepsSuccessor(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	if o.NoExpiry {
		t.Skip("backend cannot expire a paused holder")
	}
	la, lb, lc := newLocker(t), newLocker(t), newLocker(t)
	key := Key(t)
	a := mustAcquire(t, o, la, key, &distlock.Options{TTL: o.ShortTTL})
	o.Expire(t, a)
	b := mustAcquire(t, o, lb, key, &distlock.Options{TTL: o.TTL})
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
func AutoExtend(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	if o.NoExpiry {
		t.Skip("backend leases do not expire by time")
	}
	l1, l2 := newLocker(t), newLocker(t)
	key := Key(t)
	lease := mustAcquire(t, o, l1, key, &distlock.Options{TTL: o.ShortTTL, AutoExtend: true})
	time.Sleep(2*o.ShortTTL + o.ShortTTL/2) // time passing is the point here
	if err := lease.Context().Err(); err != nil {
		t.Fatalf("auto-extended lease lost: %v", context.Cause(lease.Context()))
	}
	if _, err := l2.TryAcquire(o.waitCtx(t), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire on an auto-extended lease = %v, want ErrNotAcquired", err)
	}
	release(t, lease)
}

// Kleppmann runs the scenario with fencing ("fenced": A's late write is
// rejected) and without ("unfenced": the negative control, A's late write
// overwrites B's).
func Kleppmann(t *testing.T, newLocker NewLocker, opts Options) {
	t.Run("fenced", func(t *testing.T) { kleppmann(t, newLocker, opts, true) })
	t.Run("unfenced", func(t *testing.T) { kleppmann(t, newLocker, opts, false) })
}

// kleppmann: holder A acquires and is paused (blocked on a channel) past
// its TTL/session; B acquires and writes; A resumes and writes.
func kleppmann(t *testing.T, newLocker NewLocker, opts Options, fencing bool) {
	o := setup(t, opts)
	if o.NoExpiry {
		t.Skip("backend cannot expire a paused holder")
	}
	store := o.Store(t)
	la, lb := newLocker(t), newLocker(t)
	key := Key(t)
	ctx := o.waitCtx(t)

	a := mustAcquire(t, o, la, key, &distlock.Options{TTL: o.ShortTTL})
	resume := make(chan struct{})
	aWrote := make(chan error, 1)
	go func() { // holder A: about to write when the pause hits
		<-resume
		if fencing {
			aWrote <- store.Write(ctx, a.Token(), "A")
		} else {
			aWrote <- store.WriteUnfenced(ctx, "A")
		}
	}()
	o.Expire(t, a) // A is paused past its TTL / its session dies

	b := mustAcquire(t, o, lb, key, &distlock.Options{TTL: o.TTL})
	if b.Token() <= a.Token() {
		t.Fatalf("B's token %d not above A's %d", b.Token(), a.Token())
	}
	if err := store.Write(ctx, b.Token(), "B"); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	close(resume) // A wakes up, unaware, and writes
	errA := <-aWrote
	got, err := store.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fencing {
		if !errors.Is(errA, fenced.ErrStaleToken) {
			t.Fatalf("A's late write = %v, want fenced.ErrStaleToken", errA)
		}
		if got != "B" {
			t.Fatalf("stored %q after A's rejected write, want B's data", got)
		}
	} else {
		if errA != nil {
			t.Fatalf("A's unfenced write: %v", errA)
		}
		if got != "A" {
			t.Fatalf("negative control: stored %q, want A's late write to have overwritten B's (the lock alone does not protect)", got)
		}
	}
	_ = a.Release(context.Background()) // lost: ErrLeaseLost, B untouched
	release(t, b)
}
