package distlocktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/semaphore"
	"github.com/concurkit/concurkit/fenced"
)

// semaphoreSections is the number of critical sections per goroutine of
// the semaphore's exclusion test when Options.Sections is zero: a waiter
// polls, so a section costs more than a lock handover.
const semaphoreSections = 8

// Semaphore runs the conformance suite of package semaphore on the
// Lockers of newLocker, as subtests of t:
//
//   - BadInput: New refuses a nil or typed-nil Locker, an empty name,
//     fewer than one permit, negative durations and PollMin above PollMax
//     with errors matching concurkit.ErrInvalidArgument, without calling
//     the Locker; a nil *Config means the defaults.
//   - Capacity: N Acquire calls from two Lockers get the N permit keys
//     (name + "/permit/" + i), each once; TryAcquire then fails at once with
//     distlock.ErrNotAcquired (not a context error); a released permit is
//     taken again.
//   - Tokens: over rounds that take every permit from alternating Lockers,
//     each permit's tokens strictly increase.
//   - Exclusion: Goroutines (default 16), sharing Lockers (default 4)
//     Locker instances, take one of 3 permits Sections times each (default 8 for this suite, not
//     the lock suite's 50): never more than 3 holders at once (an atomic
//     counter checked inside the section), never two holders of one
//     permit, each permit's tokens increasing, and every goroutine gets in
//     (the test fails if no section completes for WaitTimeout).
//   - HolderExpiry: a holder that stops renewing (Options.Expire) frees
//     its permit: an Acquire waiting while every permit is held gets that
//     very permit, with a higher token, only after the holder's lease ended
//     locally; the other holder is undisturbed, and the expired holder's
//     Release does not free its successor's permit.
//   - Fenced: the Kleppmann scenario on one permit, ordered: the paused
//     holder's late write with its old token to the permit's resource,
//     after its successor's write, is refused by storage
//     (fenced.ErrStaleToken) while the successor's is accepted; the
//     unfenced negative control shows the late write stored.
//   - CancelWhileWaiting: an Acquire waiting while every permit is held
//     returns, once its context is cancelled (its backoff far longer than
//     WaitTimeout), an error matching context.Canceled and
//     distlock.ErrNotAcquired, and leaves no permit held.
//
// The tests that make a holder lose its lease (HolderExpiry, Fenced) use
// ShortTTL, Expire, LossBound and Store as the lock suite does, and are
// not run with NoExpiry. Every blocking call is bounded by WaitTimeout,
// and every subtest checks that no goroutine is left behind once the
// Lockers were closed (goleak, with Options.Goleak).
func Semaphore(t *testing.T, newLocker NewLocker, opts Options) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewLocker, Options)
	}{
		{"BadInput", semBadInput},
		{"Capacity", semCapacity},
		{"Tokens", semTokens},
		{"Exclusion", semExclusion},
		{"HolderExpiry", semHolderExpiry},
		{"Fenced", semFenced},
		{"CancelWhileWaiting", semCancelWhileWaiting},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLocker, opts) })
	}
}

// semPermitKeys returns the lock keys of a semaphore's permits.
func semPermitKeys(name string, permits int) []string {
	keys := make([]string, permits)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/permit/%d", name, i)
	}
	return keys
}

func semNew(t *testing.T, l distlock.Locker, name string, permits int, cfg *semaphore.Config) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(l, name, permits, cfg)
	if err != nil {
		t.Fatalf("semaphore.New(%q, %d): %v", name, permits, err)
	}
	return s
}

// semAcquire takes a permit with Acquire (bounded by WaitTimeout) and
// checks the lease's key and token.
func semAcquire(t *testing.T, o Options, s *semaphore.Semaphore, keys []string) distlock.Lease {
	t.Helper()
	lease, err := s.Acquire(o.waitCtx(t))
	if err != nil {
		t.Fatalf("semaphore Acquire: %v", err)
	}
	semCheckPermit(t, lease, keys)
	return lease
}

func semCheckPermit(t *testing.T, lease distlock.Lease, keys []string) {
	t.Helper()
	if !slices.Contains(keys, lease.Key()) || !lease.Token().Valid() {
		_ = lease.Release(context.Background())
		t.Fatalf("lease key %q token %d, want one of the permit keys %q and a positive token", lease.Key(), lease.Token(), keys)
	}
}

// semCheckFull fails the test unless TryAcquire on s finds every permit held:
// an error matching ErrNotAcquired that is not a context error (it did
// not wait).
func semCheckFull(t *testing.T, o Options, s *semaphore.Semaphore, who string) {
	t.Helper()
	lease, err := s.TryAcquire(o.waitCtx(t))
	if lease != nil {
		_ = lease.Release(context.Background())
		t.Fatalf("%s: TryAcquire got permit %q (token %d) while every permit was held", who, lease.Key(), lease.Token())
	}
	if !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: TryAcquire with every permit held = %v, want ErrNotAcquired (and no context error)", who, err)
	}
}

// semCallCounter is a Locker that counts the calls it passes on.
type semCallCounter struct {
	distlock.Locker
	calls atomic.Int64
}

func (c *semCallCounter) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	c.calls.Add(1)
	return c.Locker.Acquire(ctx, key, opts)
}

func (c *semCallCounter) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	c.calls.Add(1)
	return c.Locker.TryAcquire(ctx, key, opts)
}

// semRoundWatcher is a Locker that closes held once n TryAcquire calls
// found their lock held: a semaphore on it has made a round that found
// its n permits held, and so waits.
type semRoundWatcher struct {
	distlock.Locker
	n    int64
	busy atomic.Int64
	held chan struct{}
}

func newSemRoundWatcher(l distlock.Locker, n int) *semRoundWatcher {
	return &semRoundWatcher{Locker: l, n: int64(n), held: make(chan struct{})}
}

func (w *semRoundWatcher) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	lease, err := w.Locker.TryAcquire(ctx, key, opts)
	if errors.Is(err, distlock.ErrNotAcquired) && w.busy.Add(1) == w.n {
		close(w.held)
	}
	return lease, err
}

// semBadInput: New's bad input, refused before any call to the Locker.
func semBadInput(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l := &semCallCounter{Locker: newLocker(t)}
	name := Key(t)
	var typedNil *semCallCounter
	for _, tc := range []struct {
		name    string
		locker  distlock.Locker
		sem     string
		permits int
		cfg     *semaphore.Config
	}{
		{"nil Locker", nil, name, 1, nil},
		{"typed nil Locker", typedNil, name, 1, nil},
		{"empty name", l, "", 1, nil},
		{"no permits", l, name, 0, nil},
		{"negative permits", l, name, -1, nil},
		{"negative TTL", l, name, 1, &semaphore.Config{TTL: -time.Second}},
		{"negative PollMin", l, name, 1, &semaphore.Config{PollMin: -time.Millisecond}},
		{"negative PollMax", l, name, 1, &semaphore.Config{PollMax: -time.Millisecond}},
		{"PollMin above PollMax", l, name, 1, &semaphore.Config{PollMin: time.Second, PollMax: time.Millisecond}},
	} {
		s, err := semaphore.New(tc.locker, tc.sem, tc.permits, tc.cfg)
		if !errors.Is(err, concurkit.ErrInvalidArgument) || s != nil {
			t.Errorf("New with %s = (%v, %v), want (nil, an error matching concurkit.ErrInvalidArgument)", tc.name, s, err)
		}
	}
	if n := l.calls.Load(); n != 0 {
		t.Errorf("New called the Locker %d times on bad input, want none", n)
	}
	s := semNew(t, l, name, 2, nil)
	if s.Permits() != 2 {
		t.Errorf("Permits() = %d, want 2", s.Permits())
	}
	if n := l.calls.Load(); n != 0 {
		t.Errorf("New called the Locker %d times, want none (no I/O)", n)
	}
	lease, err := s.TryAcquire(o.waitCtx(t))
	if err != nil {
		t.Fatalf("TryAcquire on a semaphore with nil *Config: %v", err)
	}
	semCheckPermit(t, lease, semPermitKeys(name, 2))
	release(t, lease)
}

// semCapacity: N permits, N holders, then none free; a released permit is
// free again.
func semCapacity(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	const permits = 3
	name := Key(t)
	keys := semPermitKeys(name, permits)
	sems := []*semaphore.Semaphore{
		semNew(t, newLocker(t), name, permits, &semaphore.Config{TTL: o.TTL}),
		semNew(t, newLocker(t), name, permits, &semaphore.Config{TTL: o.TTL}),
	}
	leases := make([]distlock.Lease, permits)
	seen := map[string]bool{}
	for i := range leases {
		leases[i] = semAcquire(t, o, sems[i%2], keys)
		if seen[leases[i].Key()] {
			t.Fatalf("acquisition %d got permit %q, which is held already", i, leases[i].Key())
		}
		seen[leases[i].Key()] = true
	}
	defer func() {
		for _, l := range leases {
			_ = l.Release(context.Background())
		}
	}()
	for i, s := range sems {
		semCheckFull(t, o, s, fmt.Sprintf("locker %d", i))
	}
	for _, l := range leases {
		if err := l.Context().Err(); err != nil {
			t.Fatalf("holder of %q lost its lease to a failed TryAcquire: %v", l.Key(), context.Cause(l.Context()))
		}
	}
	freed := leases[1]
	release(t, freed)
	next, err := sems[0].TryAcquire(o.waitCtx(t))
	if err != nil {
		t.Fatalf("TryAcquire after permit %q was released: %v", freed.Key(), err)
	}
	leases[1] = next
	if next.Key() != freed.Key() || next.Token() <= freed.Token() {
		t.Fatalf("after releasing %q (token %d), TryAcquire got %q (token %d): want the freed permit with a higher token",
			freed.Key(), freed.Token(), next.Key(), next.Token())
	}
}

// semTokens: rounds that take every permit, alternating between two
// Lockers; each permit's tokens strictly increase.
func semTokens(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	const permits, rounds = 3, 4
	name := Key(t)
	keys := semPermitKeys(name, permits)
	sems := []*semaphore.Semaphore{
		semNew(t, newLocker(t), name, permits, &semaphore.Config{TTL: o.TTL}),
		semNew(t, newLocker(t), name, permits, &semaphore.Config{TTL: o.TTL}),
	}
	last := map[string]fenced.Token{}
	for round := range rounds {
		var held []distlock.Lease
		for i := range permits {
			lease, err := sems[(round+i)%2].TryAcquire(o.waitCtx(t))
			if err != nil {
				t.Fatalf("round %d: TryAcquire %d of %d: %v", round, i+1, permits, err)
			}
			held = append(held, lease)
			semCheckPermit(t, lease, keys)
			if prev, ok := last[lease.Key()]; ok && lease.Token() <= prev {
				t.Errorf("round %d: permit %q: token %d, its previous holder's %d", round, lease.Key(), lease.Token(), prev)
			}
			last[lease.Key()] = lease.Token()
		}
		for _, l := range held {
			release(t, l)
		}
		if t.Failed() {
			return
		}
	}
}

// semPermitState is what the exclusion test knows of one permit.
type semPermitState struct {
	held bool
	last fenced.Token
}

// semExclusion: many goroutines, 3 permits, bounded work.
func semExclusion(t *testing.T, newLocker NewLocker, opts Options) {
	sections := opts.Sections
	if sections == 0 {
		sections = semaphoreSections
	}
	o := setup(t, opts)
	newLocker = closing(newLocker)
	const permits = 3
	name := Key(t)
	// Short polls keep the permits saturated: a waiter takes a freed
	// permit within milliseconds, so that a semaphore with a slot too many
	// would have it filled, and the counter would see it.
	cfg := &semaphore.Config{TTL: o.TTL, PollMin: 2 * time.Millisecond, PollMax: 50 * time.Millisecond}
	sems := make([]*semaphore.Semaphore, min(o.Lockers, o.Goroutines))
	for i := range sems {
		sems[i] = semNew(t, newLocker(t), name, permits, cfg)
	}
	var (
		holders, peak, done atomic.Int64
		mu                  sync.Mutex
		state               = map[string]*semPermitState{}
		wg                  sync.WaitGroup
		failed              = make(chan string, o.Goroutines)
	)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	errFailed := errors.New("another goroutine failed")
	fail := func(format string, args ...any) {
		failed <- fmt.Sprintf(format, args...)
		cancel(errFailed)
	}
	// Bounded work, not wall clock: fail only when no section completes
	// for WaitTimeout (a permit stuck with a holder that is gone, a starved
	// waiter), however slow the machine.
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
			if n := done.Load(); n != seen {
				seen, since = n, time.Now()
			} else if time.Since(since) >= o.WaitTimeout {
				cancel(fmt.Errorf("no section completed for %v (%d of %d done)", o.WaitTimeout, n, o.Goroutines*sections))
				return
			}
		}
	}()
	for g := range o.Goroutines {
		s := sems[g%len(sems)]
		wg.Go(func() {
			for range sections {
				lease, err := s.Acquire(ctx)
				if err != nil {
					if errors.Is(context.Cause(ctx), errFailed) {
						return // reported by the goroutine that failed
					}
					if c := context.Cause(ctx); c != nil && errors.Is(err, ctx.Err()) {
						err = fmt.Errorf("%w (%v)", err, c)
					}
					fail("goroutine %d: Acquire: %v", g, err)
					return
				}
				n := holders.Add(1)
				for p := peak.Load(); n > p; p = peak.Load() {
					if peak.CompareAndSwap(p, n) {
						break
					}
				}
				if n > permits {
					fail("goroutine %d: %d holders at once, more than the %d permits (it holds %q, token %d)", g, n, permits, lease.Key(), lease.Token())
					return
				}
				mu.Lock()
				st := state[lease.Key()]
				if st == nil {
					st = &semPermitState{}
					state[lease.Key()] = st
				}
				twice, prev := st.held, st.last
				st.held, st.last = true, max(prev, lease.Token())
				mu.Unlock()
				switch {
				case twice:
					fail("goroutine %d: two holders of permit %q at once (token %d)", g, lease.Key(), lease.Token())
					return
				case lease.Token() <= prev:
					fail("goroutine %d: permit %q: token %d not above its previous holder's %d", g, lease.Key(), lease.Token(), prev)
					return
				}
				// The work: long enough for the waiters to fill every
				// other slot meanwhile.
				runtime.Gosched()
				time.Sleep(2*time.Millisecond + rand.N(8*time.Millisecond))
				mu.Lock()
				st.held = false
				mu.Unlock()
				holders.Add(-1)
				done.Add(1)
				if err := lease.Release(context.Background()); err != nil {
					fail("goroutine %d: Release of %q: %v", g, lease.Key(), err)
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
	t.Logf("%d sections in %v, at most %d holders at once, %d permit keys used", done.Load(), time.Since(start).Round(time.Millisecond), peak.Load(), len(state))
	if got, want := done.Load(), int64(o.Goroutines*sections); got != want && !t.Failed() {
		t.Fatalf("%d sections, want %d", got, want)
	}
}

// semScene is the start of the tests in which a permit holder loses
// its lease: a semaphore of 2 permits, one held by C (TTL), the other by
// A (ShortTTL), and a successor B on a third Locker, waiting in Acquire.
type semScene struct {
	name  string
	keys  []string
	a, c  distlock.Lease
	other *semaphore.Semaphore // on C's Locker, for checks
	got   chan semSuccessor
	taken bool // got was read
}

type semSuccessor struct {
	b   distlock.Lease
	err error
	at  time.Time
}

func newSemScene(t *testing.T, o Options, newLocker NewLocker) *semScene {
	t.Helper()
	const permits = 2
	la, lb, lc := newLocker(t), newSemRoundWatcher(newLocker(t), permits), newLocker(t)
	sc := &semScene{name: Key(t), got: make(chan semSuccessor, 1)}
	sc.keys = semPermitKeys(sc.name, permits)
	semA := semNew(t, la, sc.name, permits, &semaphore.Config{TTL: o.ShortTTL})
	semB := semNew(t, lb, sc.name, permits, &semaphore.Config{TTL: o.TTL, PollMin: 5 * time.Millisecond, PollMax: 100 * time.Millisecond})
	sc.other = semNew(t, lc, sc.name, permits, &semaphore.Config{TTL: o.TTL})
	sc.c = semAcquire(t, o, sc.other, sc.keys)
	t.Cleanup(func() { _ = sc.c.Release(context.Background()) })
	sc.a = semAcquire(t, o, semA, sc.keys)
	t.Cleanup(func() { _ = sc.a.Release(context.Background()) })
	if sc.a.Key() == sc.c.Key() {
		t.Fatalf("two holders of permit %q", sc.a.Key())
	}
	// Registered before the Acquire's context, so it runs after that is
	// cancelled: a successor the test did not take (it failed first) is
	// released.
	t.Cleanup(func() {
		if !sc.taken {
			if r := <-sc.got; r.b != nil {
				_ = r.b.Release(context.Background())
			}
		}
	})
	ctx := o.waitCtx(t)
	go func() {
		b, err := semB.Acquire(ctx)
		r := semSuccessor{b: b, err: err, at: time.Now()}
		if err == nil { // check A at once, while Expire may still run
			checkEnded(t, o, sc.a, "when the successor's Acquire returned")
		}
		sc.got <- r
	}()
	select { // B waits once a round found both permits held
	case <-lb.held:
	case r := <-sc.got: // B did not wait: successor reports it
		sc.got <- r
	case <-time.After(o.WaitTimeout):
		t.Fatalf("the waiter made no round that found both permits held in %v", o.WaitTimeout)
	}
	return sc
}

// successor waits for B's Acquire, fails the test unless it got A's
// permit with a higher token, and returns B's lease.
func (sc *semScene) successor(t *testing.T) (distlock.Lease, time.Time) {
	t.Helper()
	r := <-sc.got
	sc.taken = true
	if r.err != nil {
		t.Fatalf("the waiting Acquire after the holder of %q expired: %v", sc.a.Key(), r.err)
	}
	t.Cleanup(func() { _ = r.b.Release(context.Background()) })
	if r.b.Key() != sc.a.Key() {
		t.Fatalf("the waiter got permit %q, want %q, the one its expired holder freed (the other holder still holds %q)", r.b.Key(), sc.a.Key(), sc.c.Key())
	}
	if r.b.Token() <= sc.a.Token() {
		t.Fatalf("permit %q: successor token %d not above the expired holder's %d", r.b.Key(), r.b.Token(), sc.a.Token())
	}
	return r.b, r.at
}

// semHolderExpiry: a holder that stops renewing frees its permit for the
// waiter.
func semHolderExpiry(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Log("not run: the Locker cannot expire a paused holder (NoExpiry)")
		return
	}
	sc := newSemScene(t, o, newLocker)
	o.Expire(t, sc.a) // A stops renewing: paused, cut off or dead
	expired := time.Now()
	b, at := sc.successor(t)
	// Not asserted (timing on a shared machine): the successor's Acquire
	// is bounded by WaitTimeout, a guard against a permit that is never
	// freed.
	t.Logf("the waiter took the freed permit %v after Expire returned (ShortTTL %v)", at.Sub(expired).Round(time.Millisecond), o.ShortTTL)
	if err := sc.c.Context().Err(); err != nil {
		t.Fatalf("the other holder lost its permit %q: %v", sc.c.Key(), context.Cause(sc.c.Context()))
	}
	if err := sc.a.Release(context.Background()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Release of the expired holder's lease = %v, want ErrLeaseLost", err)
	}
	semCheckFull(t, o, sc.other, "after the expired holder's Release")
	release(t, b)
}

// semFenced runs the ordered Kleppmann scenario on a permit with fenced
// writes ("fenced") and with plain writes ("unfenced", the negative
// control).
func semFenced(t *testing.T, newLocker NewLocker, opts Options) {
	t.Run("fenced", func(t *testing.T) { semKleppmann(t, newLocker, opts, true) })
	t.Run("unfenced", func(t *testing.T) { semKleppmann(t, newLocker, opts, false) })
}

// semKleppmann: A writes to its permit's resource while valid, is paused
// past its lease (Expire), B takes the permit and writes, then A resumes
// and writes with its old token. Fenced, storage refuses A's late write;
// unfenced, it is stored over B's.
func semKleppmann(t *testing.T, newLocker NewLocker, opts Options, fencing bool) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Log("not run: the Locker cannot expire a paused holder (NoExpiry)")
		return
	}
	sc := newSemScene(t, o, newLocker)
	// The resource of a permit is its key: tokens of different permits
	// are not comparable, so each permit fences its own resource (one
	// Store here, the only permit written).
	store := o.Store(t)
	ctx := o.waitCtx(t)
	do := func(w write) error {
		if fencing {
			return store.Write(ctx, w.token, w.value())
		}
		return store.WriteUnfenced(ctx, w.value())
	}
	valid := write{token: sc.a.Token(), who: "A-valid"}
	if err := do(valid); err != nil {
		t.Fatalf("A's write to %q while its lease is valid: %v", sc.a.Key(), err)
	}
	o.Expire(t, sc.a) // A is paused past its lease
	b, _ := sc.successor(t)
	bw := write{token: b.Token(), who: "B"}
	if err := do(bw); err != nil {
		t.Fatalf("B's write to %q (the permit's current holder): %v", b.Key(), err)
	}
	late := write{token: sc.a.Token(), who: "A-late"} // A resumes, unaware
	lateErr := do(late)
	final, err := store.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case fencing && !errors.Is(lateErr, fenced.ErrStaleToken):
		t.Errorf("permit %q: the paused holder's late write (token %d) after its successor's (token %d) = %v, want fenced.ErrStaleToken; stored %q",
			b.Key(), late.token, bw.token, lateErr, final)
	case fencing && final != bw.value():
		t.Errorf("permit %q: stored %q, want the successor's %q", b.Key(), final, bw.value())
	case !fencing && lateErr != nil:
		t.Fatalf("unfenced late write: %v", lateErr)
	case !fencing && final != late.value():
		t.Errorf("negative control: without fencing the paused holder's late write should land over its successor's; stored %q, want %q", final, late.value())
	}
}

// semCancelWhileWaiting: a cancelled Acquire returns at once and leaves
// no permit held.
func semCancelWhileWaiting(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	const permits = 2
	name := Key(t)
	keys := semPermitKeys(name, permits)
	l1, l2, l3 := newLocker(t), newLocker(t), newLocker(t)
	holders := semNew(t, l1, name, permits, &semaphore.Config{TTL: o.TTL})
	held := []distlock.Lease{semAcquire(t, o, holders, keys), semAcquire(t, o, holders, keys)}
	defer func() {
		for _, l := range held {
			_ = l.Release(context.Background())
		}
	}()
	semCheckFull(t, o, holders, "the holders' Locker")

	// The waiter's backoff is far longer than WaitTimeout: it returns in
	// time only if it watches its context while it waits.
	watcher := newSemRoundWatcher(l2, permits)
	waiter := semNew(t, watcher, name, permits, &semaphore.Config{TTL: o.TTL, PollMin: time.Hour, PollMax: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		lease, err := waiter.Acquire(ctx)
		if lease != nil {
			_ = lease.Release(context.Background())
			err = fmt.Errorf("acquired permit %q (token %d) while every permit was held", lease.Key(), lease.Token())
		}
		done <- err
	}()
	var err error
	select {
	case <-watcher.held: // a round found both permits held: the waiter waits
		cancel()
		select {
		case err = <-done:
		case <-time.After(o.WaitTimeout):
			t.Fatal("Acquire did not return after its context was cancelled")
		}
	case err = <-done:
		t.Fatalf("Acquire returned before it was cancelled: %v", err)
	case <-time.After(o.WaitTimeout):
		t.Fatalf("the waiter made no round that found both permits held in %v", o.WaitTimeout)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("cancelled Acquire = %v, want context.Canceled and ErrNotAcquired", err)
	}
	for name, acquire := range map[string]func(context.Context) (distlock.Lease, error){
		"Acquire": waiter.Acquire, "TryAcquire": waiter.TryAcquire,
	} {
		if lease, err := acquire(ctx); lease != nil || !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("%s with a cancelled context = (%v, %v), want context.Canceled and ErrNotAcquired", name, lease, err)
		}
	}
	for _, l := range held {
		if err := l.Context().Err(); err != nil {
			t.Fatalf("holder of %q lost its lease: %v", l.Key(), context.Cause(l.Context()))
		}
		release(t, l)
	}
	// Close waits for the cleanup of a request the waiter gave up on
	// (the server may apply it later); then every permit must be free.
	closeNow(t, o, l2)
	fresh := semNew(t, l3, name, permits, &semaphore.Config{TTL: o.TTL})
	seen := map[string]bool{}
	for i := range permits {
		lease, err := fresh.TryAcquire(o.waitCtx(t))
		if err != nil {
			t.Fatalf("TryAcquire %d of %d after the holders released and the cancelled waiter's Locker closed (a permit was left held): %v", i+1, permits, err)
		}
		defer release(t, lease)
		if seen[lease.Key()] {
			t.Fatalf("permit %q granted twice", lease.Key())
		}
		seen[lease.Key()] = true
	}
}
