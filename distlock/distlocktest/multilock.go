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
	"github.com/concurkit/concurkit/distlock/multilock"
	"github.com/concurkit/concurkit/fenced"
)

// DefaultOverlapDuration is how long MultiLock runs its overlap check
// (MultiLockOverlap with d = 0).
const DefaultOverlapDuration = 5 * time.Second

// MultiLock runs the checks of package multilock on Lockers from
// newLocker, as subtests of t named after them: MultiLockBadInput,
// MultiLockTryAcquireHeld, MultiLockCancelMidSet, MultiLockOverlap (for
// DefaultOverlapDuration) and MultiLockFencing. It tells whether a
// Locker, yours or a backend's, works under multilock: sets acquired in
// canonical order never overlap and never deadlock, a failed acquisition
// leaves nothing held, and each key of a set is fenced with its own
// token. Options are those of Run (TTL, ShortTTL, Expire, Store,
// WaitTimeout, NoExpiry, Goleak); the checks are exported so that a test
// can run one alone, or the overlap check for longer.
func MultiLock(t *testing.T, newLocker NewLocker, opts Options) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewLocker, Options)
	}{
		{"BadInput", MultiLockBadInput},
		{"TryAcquireHeld", MultiLockTryAcquireHeld},
		{"CancelMidSet", MultiLockCancelMidSet},
		{"Overlap", func(t *testing.T, nl NewLocker, o Options) { MultiLockOverlap(t, nl, o, 0) }},
		{"Fencing", MultiLockFencing},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLocker, opts) })
	}
}

// heldSet is what the overlap check needs of a set of locks: a
// *multilock.Set, or in the suite's own tests a deliberately flawed one.
type heldSet interface {
	Keys() []string
	Token(key string) fenced.Token
	Extend(ctx context.Context, ttl time.Duration) error
	Release(ctx context.Context) error
}

// acquireSet locks a set of keys (multilock.Acquire, or a flawed one).
type acquireSet func(ctx context.Context, l distlock.Locker, keys []string, opts *distlock.Options) (heldSet, error)

func multilockAcquire(ctx context.Context, l distlock.Locker, keys []string, opts *distlock.Options) (heldSet, error) {
	s, err := multilock.Acquire(ctx, l, keys, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// countingLocker counts the calls that reach its Locker.
type countingLocker struct {
	distlock.Locker
	calls atomic.Int64
}

func (l *countingLocker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	l.calls.Add(1)
	return l.Locker.Acquire(ctx, key, opts)
}

func (l *countingLocker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	l.calls.Add(1)
	return l.Locker.TryAcquire(ctx, key, opts)
}

// setKeys returns n keys unique to the test, in canonical (sorted) order.
func setKeys(t *testing.T, n int) []string {
	base := Key(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/%c", base, 'a'+i)
	}
	return keys
}

// shuffled returns keys in a random order.
func shuffled(keys []string) []string {
	s := slices.Clone(keys)
	rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// mustAcquireSet acquires keys on l with multilock.Acquire.
func mustAcquireSet(t *testing.T, o Options, l distlock.Locker, keys []string, lo *distlock.Options) *multilock.Set {
	t.Helper()
	s, err := multilock.Acquire(o.waitCtx(t), l, keys, lo)
	if err != nil {
		t.Fatalf("multilock.Acquire(%q): %v", keys, err)
	}
	return s
}

// checkFree fails the test unless l's TryAcquire gets every key of keys
// at once (it releases them again): nothing else holds them.
func checkFree(t *testing.T, o Options, l distlock.Locker, keys []string, when string) {
	t.Helper()
	for _, k := range keys {
		lease, err := l.TryAcquire(o.waitCtx(t), k, &distlock.Options{TTL: o.TTL})
		if err != nil {
			t.Errorf("%s: key %q is still held (another Locker's TryAcquire: %v)", when, k, err)
			continue
		}
		release(t, lease)
	}
}

// MultiLockBadInput: multilock.Acquire and TryAcquire reject a nil and a
// typed-nil Locker, no keys, an empty key (distlock.ErrInvalidKey) and a
// negative TTL with errors matching concurkit.ErrInvalidArgument, without
// calling the Locker; nil options mean the defaults.
func MultiLockBadInput(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	l := &countingLocker{Locker: newLocker(t)}
	k := Key(t)
	for _, tc := range []struct {
		name   string
		locker distlock.Locker
		keys   []string
		opts   *distlock.Options
		want   error
	}{
		{"nil locker", nil, []string{k}, nil, concurkit.ErrInvalidArgument},
		{"typed-nil locker", (*countingLocker)(nil), []string{k}, nil, concurkit.ErrInvalidArgument},
		{"nil keys", l, nil, nil, concurkit.ErrInvalidArgument},
		{"no keys", l, []string{}, nil, concurkit.ErrInvalidArgument},
		{"empty key", l, []string{k, ""}, nil, distlock.ErrInvalidKey},
		{"empty key is bad input", l, []string{"", k}, nil, concurkit.ErrInvalidArgument},
		{"only an empty key", l, []string{""}, nil, distlock.ErrInvalidKey},
		{"negative TTL", l, []string{k}, &distlock.Options{TTL: -time.Second}, concurkit.ErrInvalidArgument},
	} {
		for name, acquire := range map[string]func(context.Context, distlock.Locker, []string, *distlock.Options) (*multilock.Set, error){
			"Acquire": multilock.Acquire, "TryAcquire": multilock.TryAcquire,
		} {
			s, err := acquire(o.waitCtx(t), tc.locker, tc.keys, tc.opts)
			if !errors.Is(err, tc.want) || s != nil {
				t.Errorf("%s %s: (%v, %v), want (nil, %v)", name, tc.name, s, err, tc.want)
			}
		}
	}
	if n := l.calls.Load(); n != 0 {
		t.Errorf("the Locker was called %d times for bad input: want none, before any I/O", n)
	}
	keys := setKeys(t, 2)
	s, err := multilock.TryAcquire(o.waitCtx(t), l, keys, nil)
	if err != nil {
		t.Fatalf("TryAcquire with nil options: %v", err)
	}
	if err := s.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// MultiLockTryAcquireHeld: with one key of a set of three held by another
// Locker — the first, the middle, the last in canonical order —
// multilock.TryAcquire fails at once with ErrNotAcquired (not a context
// error), the holder keeps its lease, and the other keys are free: the
// keys taken before the held one were rolled back. With all keys free it
// succeeds, one lease and one valid token per key.
func MultiLockTryAcquireHeld(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	la, lb, lc := newLocker(t), newLocker(t), newLocker(t)
	keys := setKeys(t, 3)
	for i, held := range keys {
		blocker := mustAcquire(t, o, lb, held, &distlock.Options{TTL: o.TTL})
		s, err := multilock.TryAcquire(o.waitCtx(t), la, shuffled(keys), &distlock.Options{TTL: o.TTL})
		if !errors.Is(err, distlock.ErrNotAcquired) || s != nil {
			if s != nil {
				_ = s.Release(context.Background())
			}
			t.Fatalf("key %d of 3 held: TryAcquire = (%v, %v), want ErrNotAcquired", i+1, s, err)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Fatalf("key %d of 3 held: TryAcquire waited for its context: %v", i+1, err)
		}
		if err := blocker.Context().Err(); err != nil {
			t.Fatalf("key %d of 3 held: the holder lost its lease: %v", i+1, context.Cause(blocker.Context()))
		}
		free := slices.Delete(slices.Clone(keys), i, i+1)
		checkFree(t, o, lc, free, fmt.Sprintf("after TryAcquire failed on key %d of 3", i+1))
		release(t, blocker)
	}
	s, err := multilock.TryAcquire(o.waitCtx(t), la, shuffled(keys), &distlock.Options{TTL: o.TTL})
	if err != nil {
		t.Fatalf("TryAcquire with every key free: %v", err)
	}
	for _, k := range keys {
		if l := s.Lease(k); l == nil || l.Key() != k || !s.Token(k).Valid() {
			t.Errorf("key %q: lease %v, token %d: want its lease and a valid token", k, l, s.Token(k))
		}
	}
	if err := s.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	checkFree(t, o, lc, keys, "after Release")
}

// notifyLocker closes reached when an Acquire of key starts.
type notifyLocker struct {
	distlock.Locker
	key     string
	reached chan struct{}
	once    sync.Once
}

func (l *notifyLocker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	if key == l.key {
		l.once.Do(func() { close(l.reached) })
	}
	return l.Locker.Acquire(ctx, key, opts)
}

// MultiLockCancelMidSet: the third of four keys is held by another
// Locker; multilock.Acquire waits on it and its context is cancelled
// (once the Acquire of that key has started). It returns an error
// matching context.Canceled and ErrNotAcquired, the first and second keys
// are free again at once (another Locker's TryAcquire gets them) and the
// fourth was never taken. Once the holder released and the waiter's
// Locker was closed (Close waits for the undoing of a request the caller
// abandoned), the whole set is free. An already-cancelled context fails
// the same way and leaves nothing held.
func MultiLockCancelMidSet(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	la, lb, lc := newLocker(t), newLocker(t), newLocker(t)
	keys := setKeys(t, 4)
	blocker := mustAcquire(t, o, lb, keys[2], &distlock.Options{TTL: o.TTL})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waiter := &notifyLocker{Locker: la, key: keys[2], reached: make(chan struct{})}
	type result struct {
		s   *multilock.Set
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := multilock.Acquire(ctx, waiter, shuffled(keys), &distlock.Options{TTL: o.TTL})
		done <- result{s, err}
	}()
	select {
	case <-waiter.reached:
	case r := <-done:
		t.Fatalf("Acquire returned (%v, %v) before it reached the held key", r.s, r.err)
	case <-time.After(o.WaitTimeout):
		t.Fatalf("Acquire did not reach the third key within %v", o.WaitTimeout)
	}
	cancel()
	select {
	case r := <-done:
		if r.s != nil {
			_ = r.s.Release(context.Background())
			t.Fatalf("Acquire got a set whose third key is held (holder token %d)", blocker.Token())
		}
		if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, distlock.ErrNotAcquired) {
			t.Fatalf("cancelled Acquire = %v, want context.Canceled and ErrNotAcquired", r.err)
		}
	case <-time.After(o.WaitTimeout):
		t.Fatal("Acquire did not return after its context was cancelled")
	}
	checkFree(t, o, lc, []string{keys[0], keys[1], keys[3]}, "after Acquire was cancelled on key 3 of 4")
	if err := blocker.Context().Err(); err != nil {
		t.Fatalf("the holder of the third key lost its lease: %v", context.Cause(blocker.Context()))
	}

	cancelled, c2 := context.WithCancel(t.Context())
	c2()
	if s, err := multilock.Acquire(cancelled, la, keys, nil); s != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = (%v, %v), want context.Canceled", s, err)
	}
	release(t, blocker)
	closeNow(t, o, la)
	checkFree(t, o, lc, keys, "after the holder released and the cancelled waiter's Locker closed")
}

// MultiLockOverlap runs 8 clients, each with a Locker of its own, that
// for d (0: DefaultOverlapDuration) lock random sets of 2 to 4 of 6 keys,
// given in random order and sometimes with a key twice, with
// multilock.Acquire, extend the set once while holding it, and release
// it. A client that has not completed a set when d is over goes on until
// it has one. It asserts:
//
//   - exclusion: no key is in two clients' sets at once (every client
//     registers its keys in a shared table when Acquire returned and
//     checks them again before Release);
//   - tokens: each key's tokens strictly increase from holder to holder;
//   - the set: Keys are the keys asked for, sorted, without duplicates;
//   - no deadlock: the run ends, every client completes at least one set,
//     and a watchdog fails the test, with a dump of every goroutine, when
//     no client acquires a set for WaitTimeout.
//
// An Acquire that fails because a lease of its set was lost while it
// waited for a later key (the TTL ran out during a long wait) is counted,
// logged and retried. Run it for longer than the default to soak a
// backend, e.g. d = time.Minute.
func MultiLockOverlap(t *testing.T, newLocker NewLocker, opts Options, d time.Duration) {
	overlap(t, newLocker, opts, d, multilockAcquire)
}

func overlap(t *testing.T, newLocker NewLocker, opts Options, d time.Duration, acquire acquireSet) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if d <= 0 {
		d = DefaultOverlapDuration
	}
	const clients = 8
	keys := setKeys(t, 6)
	lockers := make([]distlock.Locker, clients)
	for i := range lockers {
		lockers[i] = newLocker(t)
	}
	var (
		mu      sync.Mutex
		holder  = map[string]int{}          // key → client whose set holds it
		last    = map[string]fenced.Token{} // key → highest token seen
		sets    = make([]int, clients)      // sets completed, per client (each writes its own)
		total   atomic.Int64
		retried atomic.Int64
		wg      sync.WaitGroup

		failMu sync.Mutex
		failed []string // reported after the clients stopped
	)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	fail := func(format string, args ...any) {
		failMu.Lock()
		failed = append(failed, fmt.Sprintf(format, args...))
		failMu.Unlock()
		cancel(errors.New("a client failed"))
	}
	watchdog := make(chan struct{})
	go func() {
		defer close(watchdog)
		tick := time.NewTicker(o.WaitTimeout / 10)
		defer tick.Stop()
		seen, since := int64(-1), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n := total.Load(); n != seen {
				seen, since = n, time.Now()
			} else if time.Since(since) >= o.WaitTimeout {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				fail("no set acquired for %v (%d acquired so far): deadlock? goroutines:\n%s", o.WaitTimeout, n, buf)
				return
			}
		}
	}()
	start := time.Now()
	end := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			for ctx.Err() == nil && (time.Now().Before(end) || sets[c] == 0) {
				n := 2 + rand.IntN(3)
				want := shuffled(keys)[:n]
				if rand.IntN(4) == 0 {
					want = append(want, want[rand.IntN(n)])
				}
				s, err := acquire(ctx, lockers[c], want, &distlock.Options{TTL: o.TTL})
				if err != nil {
					switch {
					case ctx.Err() != nil: // stopped: the cause is reported by whoever stopped it
					case errors.Is(err, distlock.ErrLeaseLost):
						retried.Add(1)
						continue
					default:
						fail("client %d: Acquire(%q): %v", c, want, err)
					}
					return
				}
				got := s.Keys()
				if canon := slices.Compact(slices.Sorted(slices.Values(want))); !slices.Equal(got, canon) {
					fail("client %d: Keys() = %q for %q, want %q", c, got, want, canon)
				}
				mu.Lock()
				for _, k := range got {
					if h, held := holder[k]; held {
						fail("clients %d and %d hold key %q at once: their sets overlap", h, c, k)
					}
					holder[k] = c
					if tok := s.Token(k); tok <= last[k] {
						fail("key %q: client %d's token %d not above the previous holder's %d", k, c, tok, last[k])
					} else {
						last[k] = tok
					}
				}
				mu.Unlock()
				total.Add(1)
				sets[c]++
				// Work under the locks: one round trip per key, which keeps
				// the window in which an overlapping holder would be seen
				// as wide as a real critical section's.
				if err := s.Extend(ctx, o.TTL); err != nil && ctx.Err() == nil {
					fail("client %d: Extend(%q): %v", c, got, err)
				}
				mu.Lock()
				for _, k := range got {
					if h := holder[k]; h != c {
						fail("key %q: client %d registered while client %d held it", k, h, c)
					} else {
						delete(holder, k)
					}
				}
				mu.Unlock()
				if err := s.Release(context.Background()); err != nil {
					fail("client %d: Release(%q): %v", c, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	cancel(nil)
	<-watchdog
	for _, msg := range failed {
		t.Error(msg)
	}
	t.Logf("%d sets in %v by %d clients (per client %v), %d retried after a lease lost while waiting",
		total.Load(), time.Since(start).Round(time.Millisecond), clients, sets, retried.Load())
	if t.Failed() {
		return
	}
	for c, n := range sets {
		if n == 0 {
			t.Errorf("client %d completed no set", c)
		}
	}
}

// MultiLockFencing runs the per-key fencing scenario with fenced writes
// ("fenced") and with plain writes ("unfenced", the negative control).
//
// Holder A locks a set of three keys with ShortTTL and writes each key's
// record (a Store of its own per key, from Options.Store) with that key's
// token. Then every lease of A is made to lose its lock (Options.Expire,
// lease by lease; A does not know), A's set Context must end with a cause
// matching ErrLeaseLost, and holder B locks the same keys (in another
// order) with another Locker; B's token of each key must be above A's.
// For each key B writes, then A writes late with its old token of that
// key. Fenced, A's late write must fail with fenced.ErrStaleToken and the
// record keep B's value; unfenced, A's late write is accepted over B's
// (the lock alone does not protect storage). A's Release reports
// ErrLeaseLost and leaves B's set held. With NoExpiry it does nothing
// (and logs so).
func MultiLockFencing(t *testing.T, newLocker NewLocker, opts Options) {
	t.Run("fenced", func(t *testing.T) { multiLockFencing(t, newLocker, opts, true) })
	t.Run("unfenced", func(t *testing.T) { multiLockFencing(t, newLocker, opts, false) })
}

func multiLockFencing(t *testing.T, newLocker NewLocker, opts Options, fencing bool) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Log("NoExpiry: the Locker cannot expire a paused holder; the fencing scenario needs one and did not run")
		return
	}
	la, lb := newLocker(t), newLocker(t)
	keys := setKeys(t, 3)
	stores := make(map[string]Store, len(keys))
	for _, k := range keys {
		stores[k] = o.Store(t)
	}
	write := func(ctx context.Context, k string, token fenced.Token, who string) error {
		v := fmt.Sprintf("%d %s", token, who)
		if fencing {
			return stores[k].Write(ctx, token, v)
		}
		return stores[k].WriteUnfenced(ctx, v)
	}
	ctx := o.waitCtx(t)

	a := mustAcquireSet(t, o, la, shuffled(keys), &distlock.Options{TTL: o.ShortTTL})
	for _, k := range keys {
		if err := write(ctx, k, a.Token(k), "A-valid"); err != nil {
			t.Fatalf("key %q: A's write while its set is valid: %v", k, err)
		}
	}
	for _, k := range keys {
		o.Expire(t, a.Lease(k)) // A is paused past its TTL / its session dies
	}
	select {
	case <-a.Context().Done():
	case <-time.After(o.WaitTimeout + o.LossBound):
		t.Fatalf("every lease of A lost its lock, but the set's Context did not end within %v", o.WaitTimeout+o.LossBound)
	}
	if c := context.Cause(a.Context()); !errors.Is(c, distlock.ErrLeaseLost) {
		t.Errorf("A's set context cause = %v, want ErrLeaseLost", c)
	}

	b := mustAcquireSet(t, o, lb, shuffled(keys), &distlock.Options{TTL: o.TTL})
	defer func() {
		if err := b.Release(context.Background()); err != nil {
			t.Errorf("B's Release: %v", err)
		}
	}()
	for _, k := range keys {
		if b.Token(k) <= a.Token(k) {
			t.Fatalf("key %q: B's token %d not above A's %d", k, b.Token(k), a.Token(k))
		}
	}
	for _, k := range keys {
		bv := fmt.Sprintf("%d B", b.Token(k))
		if err := write(ctx, k, b.Token(k), "B"); err != nil {
			t.Fatalf("key %q: B's write (the current holder, token %d): %v", k, b.Token(k), err)
		}
		late := write(ctx, k, a.Token(k), "A-late")
		stored, err := stores[k].Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case fencing && !errors.Is(late, fenced.ErrStaleToken):
			t.Errorf("key %q: A's late write with its old token %d after B's with %d = %v, want fenced.ErrStaleToken", k, a.Token(k), b.Token(k), late)
		case fencing && stored != bv:
			t.Errorf("key %q: stored %q after A's late write, want B's %q: a stale holder's write landed after a newer holder's", k, stored, bv)
		case !fencing && late != nil:
			t.Fatalf("key %q: unfenced late write: %v", k, late)
		case !fencing && stored == bv:
			t.Errorf("negative control, key %q: A's unfenced late write did not land over B's (stored %q)", k, stored)
		}
	}
	if err := a.Release(context.Background()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Release of A's lost set = %v, want ErrLeaseLost", err)
	}
	if !b.Valid() {
		t.Errorf("B lost its set after A's Release: %v", context.Cause(b.Context()))
	}
}
