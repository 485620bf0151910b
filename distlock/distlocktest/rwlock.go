package distlocktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/rwlock"
	"github.com/concurkit/concurkit/fenced"
)

// rwSections is the number of critical sections per goroutine of the
// read-write lock's exclusion test when Options.Sections is zero: a
// writer takes Readers+1 leases, so a section costs more than a lock
// handover.
const rwSections = 6

// RWLock runs the conformance suite of package rwlock on the Lockers of
// newLocker, as subtests of t:
//
//   - BadInput: New refuses a nil or typed-nil Locker, an empty name,
//     Readers below 0 or above rwlock.MaxReaders, negative durations and
//     PollMin above PollMax with errors matching
//     concurkit.ErrInvalidArgument, without calling the Locker; a nil or
//     zero *RWLock is refused the same way; a nil *Config means the
//     defaults (16 readers), and the keys are the documented ones (a
//     writer takes name/gate, then name/read/0 … 15).
//   - ReadersOverlap: R readers, each on its own Locker, hold the lock at
//     once (a barrier inside the section that needs all of them); one
//     more reader waits (its round finds the R slots held) and, cancelled,
//     returns context.Canceled and distlock.ErrNotAcquired; once they are
//     gone, a writer gets in.
//   - Exclusion: 3 writers and 5 readers, each on its own Locker, on 3
//     reader slots, Sections times each (default 6): never a writer with
//     anyone else inside, never more readers than slots (an atomic state
//     word checked inside every section), writer tokens strictly
//     increasing in the order writers got in; the test fails if no section
//     completes for WaitTimeout.
//   - WriterPreference: 4 readers re-acquire the lock in a loop, leaving
//     only while another reader is inside (so that the lock is never free
//     of readers), until a writer took the gate; the writer's Lock must
//     return (the test fails only on the WaitTimeout guard; the wait is
//     logged), and no reader that called RLock after the writer took the
//     gate may get in before the writer.
//   - Upgrade: Lock on the *RWLock that holds a read returns
//     rwlock.ErrUpgrade at once, without calling the Locker; after the
//     read's Release, another Locker's writer gets in, and the same
//     *RWLock's Lock works again; Lock and RLock while it holds the write
//     return rwlock.ErrReentrant at once.
//   - CancelWhileWaiting: a Lock waiting for a slot held by a reader
//     returns, once its context is cancelled, an error matching
//     context.Canceled and distlock.ErrNotAcquired, and leaves the gate
//     and the slots it took free: a reader on another Locker gets in while
//     the first reader still holds its slot, and a writer once it left.
//   - Fenced: a writer whose leases expire (Options.Expire on its gate
//     lease, TTL ShortTTL) is succeeded by the next writer, whose token
//     is higher and whose Lock returns only after the old writer's hold
//     ended locally (Valid false, Context done with distlock.ErrLeaseLost);
//     the old writer's late write with its token, after its successor's,
//     is refused by storage (fenced.ErrStaleToken); the unfenced negative
//     control shows it stored. Not run with NoExpiry.
//
// Every blocking call is bounded by WaitTimeout, and every subtest checks
// that no goroutine is left behind once the Lockers were closed (goleak,
// with Options.Goleak). BadInput takes the write lock with the default 16
// slots, 17 leases at once: a Locker whose leases each hold a connection
// (pglock) needs a pool of more than that.
func RWLock(t *testing.T, newLocker NewLocker, opts Options) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewLocker, Options)
	}{
		{"BadInput", rwBadInput},
		{"ReadersOverlap", rwReadersOverlap},
		{"Exclusion", rwExclusion},
		{"WriterPreference", rwWriterPreference},
		{"Upgrade", rwUpgrade},
		{"CancelWhileWaiting", rwCancelWhileWaiting},
		{"Fenced", rwFenced},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLocker, opts) })
	}
}

// rwSpy is a Locker that counts the calls it passes on and tells the
// test about them: onAcquire before an Acquire is passed on, onGrant
// after an Acquire or TryAcquire returned a lease, onBusy after a
// TryAcquire found its lock held. The functions are set before the Locker
// is used.
type rwSpy struct {
	distlock.Locker
	calls     atomic.Int64
	onAcquire func(key string)
	onGrant   func(key string, l distlock.Lease)
	onBusy    func(key string)
}

func (s *rwSpy) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	s.calls.Add(1)
	if s.onAcquire != nil {
		s.onAcquire(key)
	}
	l, err := s.Locker.Acquire(ctx, key, opts)
	if err == nil && s.onGrant != nil {
		s.onGrant(key, l)
	}
	return l, err
}

func (s *rwSpy) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	s.calls.Add(1)
	l, err := s.Locker.TryAcquire(ctx, key, opts)
	switch {
	case err == nil && s.onGrant != nil:
		s.onGrant(key, l)
	case errors.Is(err, distlock.ErrNotAcquired) && s.onBusy != nil:
		s.onBusy(key)
	}
	return l, err
}

func rwNew(t *testing.T, l distlock.Locker, name string, cfg *rwlock.Config) *rwlock.RWLock {
	t.Helper()
	rw, err := rwlock.New(l, name, cfg)
	if err != nil {
		t.Fatalf("rwlock.New(%q): %v", name, err)
	}
	return rw
}

func rwRLock(t *testing.T, o Options, rw *rwlock.RWLock, who string) *rwlock.Read {
	t.Helper()
	r, err := rw.RLock(o.waitCtx(t))
	if err != nil {
		t.Fatalf("%s: RLock: %v", who, err)
	}
	if !r.Token().Valid() || !r.Valid() {
		t.Fatalf("%s: read lock with token %d, valid %v", who, r.Token(), r.Valid())
	}
	return r
}

func rwLock(t *testing.T, o Options, rw *rwlock.RWLock, who string) *rwlock.Write {
	t.Helper()
	w, err := rw.Lock(o.waitCtx(t))
	if err != nil {
		t.Fatalf("%s: Lock: %v", who, err)
	}
	if !w.Token().Valid() || !w.Valid() {
		t.Fatalf("%s: write lock with token %d, valid %v", who, w.Token(), w.Valid())
	}
	return w
}

// rwRelease releases a Read or a Write and fails the test on an error.
func rwRelease(t *testing.T, h interface{ Release(context.Context) error }, who string) {
	t.Helper()
	if err := h.Release(context.Background()); err != nil {
		t.Fatalf("%s: Release: %v", who, err)
	}
}

// rwSlotKeys returns the reader slots' keys of a lock.
func rwSlotKeys(name string, readers int) []string {
	keys := make([]string, readers)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/read/%d", name, i)
	}
	return keys
}

// rwBadInput: New's bad input, refused before any call to the Locker; the
// defaults and the keys.
func rwBadInput(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	var (
		mu      sync.Mutex
		granted []string // keys, in the order granted
	)
	l := &rwSpy{Locker: newLocker(t), onGrant: func(key string, _ distlock.Lease) {
		mu.Lock()
		defer mu.Unlock()
		granted = append(granted, key)
	}}
	name := Key(t)
	var typedNil *rwSpy
	for _, tc := range []struct {
		name   string
		locker distlock.Locker
		lock   string
		cfg    *rwlock.Config
	}{
		{"nil Locker", nil, name, nil},
		{"typed nil Locker", typedNil, name, nil},
		{"empty name", l, "", nil},
		{"negative Readers", l, name, &rwlock.Config{Readers: -1}},
		{"Readers above MaxReaders", l, name, &rwlock.Config{Readers: rwlock.MaxReaders + 1}},
		{"negative TTL", l, name, &rwlock.Config{TTL: -time.Second}},
		{"negative PollMin", l, name, &rwlock.Config{PollMin: -time.Millisecond}},
		{"negative PollMax", l, name, &rwlock.Config{PollMax: -time.Millisecond}},
		{"PollMin above PollMax", l, name, &rwlock.Config{PollMin: time.Second, PollMax: time.Millisecond}},
	} {
		rw, err := rwlock.New(tc.locker, tc.lock, tc.cfg)
		if !errors.Is(err, concurkit.ErrInvalidArgument) || rw != nil {
			t.Errorf("New with %s = (%v, %v), want (nil, an error matching concurkit.ErrInvalidArgument)", tc.name, rw, err)
		}
	}
	for what, rw := range map[string]*rwlock.RWLock{"nil": nil, "zero": {}} {
		if r, err := rw.RLock(o.waitCtx(t)); r != nil || !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("RLock on a %s RWLock = (%v, %v), want ErrInvalidArgument", what, r, err)
		}
		if w, err := rw.Lock(o.waitCtx(t)); w != nil || !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("Lock on a %s RWLock = (%v, %v), want ErrInvalidArgument", what, w, err)
		}
	}
	if n := l.calls.Load(); n != 0 {
		t.Errorf("the Locker was called %d times on bad input, want none", n)
	}
	rw := rwNew(t, l, name, nil)
	if n := l.calls.Load(); n != 0 {
		t.Errorf("New called the Locker %d times, want none (no I/O)", n)
	}
	if rw.Readers() != rwlock.DefaultReaders || rw.Name() != name {
		t.Errorf("Readers() = %d, Name() = %q; want %d and %q", rw.Readers(), rw.Name(), rwlock.DefaultReaders, name)
	}
	slots := rwSlotKeys(name, rwlock.DefaultReaders)
	r := rwRLock(t, o, rw, "reader with a nil *Config")
	rwRelease(t, r, "reader")
	mu.Lock()
	if len(granted) != 2 || granted[0] != name+"/gate" || !slices.Contains(slots, granted[1]) {
		t.Errorf("a reader was granted %q, want the gate %q, then one of the slots %s/read/0 … 15", granted, name+"/gate", name)
	}
	granted = nil
	mu.Unlock()
	w := rwLock(t, o, rw, "writer with a nil *Config")
	rwRelease(t, w, "writer")
	mu.Lock()
	defer mu.Unlock()
	if want := append([]string{name + "/gate"}, slots...); !slices.Equal(granted, want) {
		t.Errorf("a writer was granted %q, want %q: the gate, then every slot in index order", granted, want)
	}
}

// rwReadersOverlap: R readers at once, the next one waits.
func rwReadersOverlap(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	const readers = 4
	name := Key(t)
	cfg := &rwlock.Config{TTL: o.TTL, Readers: readers}
	var (
		inside  atomic.Int32
		allIn   = make(chan struct{})
		leave   = make(chan struct{})
		results = make(chan error, readers)
		wg      sync.WaitGroup
	)
	ctx := o.waitCtx(t)
	for i := range readers {
		rw := rwNew(t, newLocker(t), name, cfg)
		wg.Go(func() {
			r, err := rw.RLock(ctx)
			if err != nil {
				results <- fmt.Errorf("reader %d: RLock: %w", i, err)
				return
			}
			defer func() { _ = r.Release(context.Background()) }()
			if inside.Add(1) == readers {
				close(allIn)
			}
			// The barrier: every reader waits here, inside, until all of
			// them are; a lock that admits one reader at a time never
			// lets the last one in.
			select {
			case <-allIn:
			case <-ctx.Done():
				results <- fmt.Errorf("reader %d: only %d of %d readers got in at once within %v", i, inside.Load(), readers, o.WaitTimeout)
				return
			}
			<-leave
			if err := r.Release(context.Background()); err != nil {
				results <- fmt.Errorf("reader %d: Release: %w", i, err)
				return
			}
			results <- nil
		})
	}
	select {
	case <-allIn:
	case <-ctx.Done():
	}
	if ctx.Err() == nil {
		// One reader too many: its round finds every slot held, and it
		// waits (its backoff far longer than WaitTimeout) until cancelled.
		var busy atomic.Int32
		held := make(chan struct{})
		spy := &rwSpy{Locker: newLocker(t), onBusy: func(string) {
			if busy.Add(1) == readers {
				close(held)
			}
		}}
		extra := rwNew(t, spy, name, &rwlock.Config{TTL: o.TTL, Readers: readers, PollMin: time.Hour, PollMax: time.Hour})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			r, err := extra.RLock(cctx)
			if r != nil {
				_ = r.Release(context.Background())
				err = fmt.Errorf("got a read lock while %d readers held the %d slots", readers, readers)
			}
			done <- err
		}()
		select {
		case <-held:
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
				t.Errorf("reader %d of %d slots, cancelled while it waits: RLock = %v, want context.Canceled and ErrNotAcquired", readers+1, readers, err)
			}
		case err := <-done:
			cancel()
			t.Errorf("reader %d of %d slots: RLock returned while every slot was held: %v", readers+1, readers, err)
		case <-ctx.Done():
			cancel()
			<-done
			t.Errorf("reader %d of %d slots: no round found the %d slots held within %v", readers+1, readers, readers, o.WaitTimeout)
		}
	}
	close(leave)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	w := rwLock(t, o, rwNew(t, newLocker(t), name, cfg), "writer after the readers left")
	rwRelease(t, w, "writer")
}

// rwExclusion: writers and readers mixed; an atomic state word is -1
// while a writer is inside, else the number of readers inside.
func rwExclusion(t *testing.T, newLocker NewLocker, opts Options) {
	sections := opts.Sections
	if sections == 0 {
		sections = rwSections
	}
	o := setup(t, opts)
	newLocker = closing(newLocker)
	const writers, readers, slots = 3, 5, 3
	name := Key(t)
	// Short polls keep the slots busy: a reader takes a freed slot within
	// milliseconds.
	cfg := &rwlock.Config{TTL: o.TTL, Readers: slots, PollMin: 2 * time.Millisecond, PollMax: 50 * time.Millisecond}
	var (
		state       atomic.Int64
		peak, done  atomic.Int64
		mu          sync.Mutex
		last        fenced.Token // the token of the latest writer in
		writersDone int
		wg          sync.WaitGroup
		failed      = make(chan string, writers+readers)
	)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	errFailed := errors.New("another goroutine failed")
	fail := func(format string, args ...any) {
		failed <- fmt.Sprintf(format, args...)
		cancel(errFailed)
	}
	// Bounded work, not wall clock: fail only when no section completes
	// for WaitTimeout (a writer starved, a slot stuck), however slow the
	// machine.
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
				cancel(fmt.Errorf("no section completed for %v (%d of %d done)", o.WaitTimeout, n, (writers+readers)*sections))
				return
			}
		}
	}()
	acquireErr := func(who string, err error) {
		if errors.Is(context.Cause(ctx), errFailed) {
			return // reported by the goroutine that failed
		}
		if c := context.Cause(ctx); c != nil && errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", err, c)
		}
		fail("%s: %v", who, err)
	}
	work := func() {
		runtime.Gosched() // let another holder, if any, walk in
		time.Sleep(time.Millisecond + rand.N(4*time.Millisecond))
	}
	for g := range writers + readers {
		rw := rwNew(t, newLocker(t), name, cfg)
		if g < writers {
			wg.Go(func() {
				for range sections {
					w, err := rw.Lock(ctx)
					if err != nil {
						acquireErr(fmt.Sprintf("writer %d: Lock", g), err)
						return
					}
					if !state.CompareAndSwap(0, -1) {
						s := state.Load()
						_ = w.Release(context.Background())
						if s < 0 {
							fail("writer %d: two writers inside at once (token %d)", g, w.Token())
						} else {
							fail("writer %d: a writer got in with %d readers inside (token %d)", g, s, w.Token())
						}
						return
					}
					mu.Lock()
					prev := last
					last = w.Token()
					writersDone++
					mu.Unlock()
					if w.Token() <= prev {
						_ = w.Release(context.Background())
						fail("writer %d: writer token %d not above the previous writer's %d", g, w.Token(), prev)
						return
					}
					work()
					state.Store(0)
					done.Add(1)
					if err := w.Release(context.Background()); err != nil {
						fail("writer %d: Release: %v", g, err)
						return
					}
				}
			})
			continue
		}
		wg.Go(func() {
			for range sections {
				r, err := rw.RLock(ctx)
				if err != nil {
					acquireErr(fmt.Sprintf("reader %d: RLock", g), err)
					return
				}
				var n int64
				for {
					s := state.Load()
					if s < 0 {
						_ = r.Release(context.Background())
						fail("reader %d: a reader got in while a writer was inside (token %d)", g, r.Token())
						return
					}
					if state.CompareAndSwap(s, s+1) {
						n = s + 1
						break
					}
				}
				for p := peak.Load(); n > p; p = peak.Load() {
					if peak.CompareAndSwap(p, n) {
						break
					}
				}
				if n > slots {
					_ = r.Release(context.Background())
					fail("reader %d: %d readers inside at once, more than the %d slots", g, n, slots)
					return
				}
				work()
				state.Add(-1)
				done.Add(1)
				if err := r.Release(context.Background()); err != nil {
					fail("reader %d: Release: %v", g, err)
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
	t.Logf("%d sections (%d writes) in %v, at most %d readers at once", done.Load(), writersDone, time.Since(start).Round(time.Millisecond), peak.Load())
	if got, want := done.Load(), int64((writers+readers)*sections); got != want && !t.Failed() {
		t.Fatalf("%d sections, want %d", got, want)
	}
}

// rwWriterPreference: a writer behind a stream of readers that never
// leaves the lock free gets in, before every reader that came after it.
func rwWriterPreference(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	const readers, slots, warm = 4, 8, 8
	name := Key(t)
	cfg := &rwlock.Config{TTL: o.TTL, Readers: slots, PollMin: 2 * time.Millisecond, PollMax: 50 * time.Millisecond}
	var (
		// seq orders the events: a reader's RLock call and its entry,
		// the writer taking the gate, the writer's entry.
		seq               atomic.Int64
		gateSeq, writerIn atomic.Int64 // 0 until it happened
		entries           atomic.Int64
		warmed            = make(chan struct{})
		behind            atomic.Int64 // readers that called RLock after the writer took the gate

		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		inside  int  // readers inside (counted from RLock's return to before Release)
		gated   bool // the writer holds the gate: readers inside may leave
		stopped bool
		wg      sync.WaitGroup
		failed  = make(chan string, readers+1)
	)
	ctx, cancel := context.WithCancelCause(o.waitCtx(t))
	defer cancel(nil)
	errFailed := errors.New("another goroutine failed")
	fail := func(format string, args ...any) {
		failed <- fmt.Sprintf(format, args...)
		cancel(errFailed)
	}
	wake := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		cond.Broadcast()
	})
	defer wake()
	for g := range readers {
		rw := rwNew(t, newLocker(t), name, cfg)
		wg.Go(func() {
			for {
				mu.Lock()
				stop := stopped
				mu.Unlock()
				if stop || ctx.Err() != nil {
					return
				}
				call := seq.Add(1)
				if g := gateSeq.Load(); g != 0 && call > g {
					behind.Add(1)
				}
				r, err := rw.RLock(ctx)
				if err != nil {
					if ctx.Err() == nil {
						fail("reader %d: RLock: %v", g, err)
					}
					return
				}
				in := seq.Add(1)
				if gs, ws := gateSeq.Load(), writerIn.Load(); gs != 0 && call > gs && (ws == 0 || in < ws) {
					_ = r.Release(context.Background())
					fail("reader %d called RLock (event %d) after the writer took the gate (event %d) and got in (event %d) before the writer (in at event %d; 0: not yet)", g, call, gs, in, ws)
					return
				}
				if ws := writerIn.Load(); ws != 0 && gateSeq.Load() != 0 {
					// Between the writer's entry and the end of the test,
					// a reader gets in only after the writer left: the
					// writer's section sets stopped before it releases.
					mu.Lock()
					stop := stopped
					mu.Unlock()
					if !stop {
						_ = r.Release(context.Background())
						fail("reader %d got in (event %d) while the writer was inside (since event %d)", g, in, ws)
						return
					}
				}
				mu.Lock()
				inside++
				cond.Broadcast()
				mu.Unlock()
				if entries.Add(1) == warm {
					close(warmed)
				}
				time.Sleep(time.Millisecond + rand.N(2*time.Millisecond)) // the read
				// Leave only while another reader is inside, so that the
				// lock is never free of readers — until the writer holds
				// the gate (no reader can come in any more) or the test
				// ends.
				mu.Lock()
				for inside < 2 && !gated && !stopped && ctx.Err() == nil {
					cond.Wait()
				}
				inside--
				mu.Unlock()
				if err := r.Release(context.Background()); err != nil {
					fail("reader %d: Release: %v", g, err)
					return
				}
			}
		})
	}
	select {
	case <-warmed:
	case <-ctx.Done():
	}
	if ctx.Err() == nil {
		spy := &rwSpy{Locker: newLocker(t), onGrant: func(key string, _ distlock.Lease) {
			if key == name+"/gate" {
				gateSeq.Store(seq.Add(1))
				mu.Lock()
				gated = true
				cond.Broadcast()
				mu.Unlock()
			}
		}}
		writer := rwNew(t, spy, name, cfg)
		start := time.Now()
		w, err := writer.Lock(ctx)
		switch {
		case err != nil && !errors.Is(context.Cause(ctx), errFailed):
			fail("the writer behind a stream of readers did not get in within %v: Lock: %v", o.WaitTimeout, err)
		case err == nil:
			writerIn.Store(seq.Add(1))
			waited := time.Since(start)
			mu.Lock()
			n := inside
			mu.Unlock()
			if n != 0 {
				fail("the writer got in with %d readers inside", n)
			}
			t.Logf("the writer got in %v after it called Lock, behind a stream of %d readers (%d entries before; %d RLock calls queued behind it)",
				waited.Round(time.Millisecond), readers, entries.Load(), behind.Load())
			mu.Lock()
			stopped = true
			cond.Broadcast()
			mu.Unlock()
			if err := w.Release(context.Background()); err != nil {
				fail("writer: Release: %v", err)
			}
		}
	}
	mu.Lock()
	stopped = true
	cond.Broadcast()
	mu.Unlock()
	wg.Wait()
	close(failed)
	for msg := range failed {
		t.Error(msg)
	}
}

// rwUpgrade: Lock while holding a read, and Lock or RLock while holding
// the write, are refused at once; nothing is left held.
func rwUpgrade(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	name := Key(t)
	cfg := &rwlock.Config{TTL: o.TTL, Readers: 2}
	spy := &rwSpy{Locker: newLocker(t)}
	rw := rwNew(t, spy, name, cfg)
	r := rwRLock(t, o, rw, "reader")
	before := spy.calls.Load()
	w, err := rw.Lock(o.waitCtx(t))
	if w != nil {
		_ = w.Release(context.Background())
	}
	if !errors.Is(err, rwlock.ErrUpgrade) || errors.Is(err, distlock.ErrNotAcquired) {
		_ = r.Release(context.Background())
		t.Fatalf("Lock on the RWLock that holds a read = (%v, %v), want rwlock.ErrUpgrade (and not ErrNotAcquired)", w, err)
	}
	if n := spy.calls.Load() - before; n != 0 {
		t.Errorf("Lock refused with ErrUpgrade called the Locker %d times, want none (refused at once)", n)
	}
	if !r.Valid() {
		t.Errorf("the read lock ended with the refused upgrade: %v", context.Cause(r.Context()))
	}
	rwRelease(t, r, "reader")

	// Nothing is left held: a writer on another Locker gets in.
	other := rwLock(t, o, rwNew(t, newLocker(t), name, cfg), "writer on another Locker after the read was released")
	rwRelease(t, other, "writer on another Locker")
	// The RWLock forgot the released read: its own Lock works.
	w = rwLock(t, o, rw, "Lock on the RWLock after its read was released")
	before = spy.calls.Load()
	if r2, err := rw.RLock(o.waitCtx(t)); r2 != nil || !errors.Is(err, rwlock.ErrReentrant) {
		if r2 != nil {
			_ = r2.Release(context.Background())
		}
		t.Errorf("RLock on the RWLock that holds the write = (%v, %v), want rwlock.ErrReentrant", r2, err)
	}
	if w2, err := rw.Lock(o.waitCtx(t)); w2 != nil || !errors.Is(err, rwlock.ErrReentrant) {
		if w2 != nil {
			_ = w2.Release(context.Background())
		}
		t.Errorf("Lock on the RWLock that holds the write = (%v, %v), want rwlock.ErrReentrant", w2, err)
	}
	if n := spy.calls.Load() - before; n != 0 {
		t.Errorf("calls refused with ErrReentrant called the Locker %d times, want none", n)
	}
	rwRelease(t, w, "writer")
	r = rwRLock(t, o, rw, "RLock on the RWLock after its write was released")
	rwRelease(t, r, "reader")
}

// rwCancelWhileWaiting: a Lock cancelled while it waits for a reader's
// slot returns ctx's error and leaves nothing held.
func rwCancelWhileWaiting(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	name := Key(t)
	cfg := &rwlock.Config{TTL: o.TTL, Readers: 2}
	var readerSlot atomic.Value // the key of the slot the first reader holds
	readerSpy := &rwSpy{Locker: newLocker(t), onGrant: func(key string, _ distlock.Lease) {
		if strings.HasPrefix(key, name+"/read/") {
			readerSlot.Store(key)
		}
	}}
	r := rwRLock(t, o, rwNew(t, readerSpy, name, cfg), "reader")
	defer func() { _ = r.Release(context.Background()) }()
	slot, _ := readerSlot.Load().(string)
	if slot == "" {
		t.Fatal("the reader's Locker granted no slot key")
	}

	waiting := make(chan struct{})
	var once sync.Once
	writerLocker := &rwSpy{Locker: newLocker(t), onAcquire: func(key string) {
		if key == slot {
			once.Do(func() { close(waiting) })
		}
	}}
	writer := rwNew(t, writerLocker, name, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		w, err := writer.Lock(ctx)
		if w != nil {
			_ = w.Release(context.Background())
			err = fmt.Errorf("got the write lock while a reader held slot %q", slot)
		}
		done <- err
	}()
	var err error
	select {
	case <-waiting: // the writer holds the gate and waits for the reader's slot
		cancel()
		select {
		case err = <-done:
		case <-time.After(o.WaitTimeout):
			t.Fatal("Lock did not return after its context was cancelled")
		}
	case err = <-done:
		t.Fatalf("Lock returned before it waited for the reader's slot %q: %v", slot, err)
	case <-time.After(o.WaitTimeout):
		t.Fatalf("the writer did not ask for the reader's slot %q within %v", slot, o.WaitTimeout)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("Lock cancelled while it waits for a slot = %v, want context.Canceled and ErrNotAcquired", err)
	}
	for what, call := range map[string]func(context.Context) error{
		"Lock":  func(ctx context.Context) error { _, err := writer.Lock(ctx); return err },
		"RLock": func(ctx context.Context) error { _, err := writer.RLock(ctx); return err },
	} {
		if err := call(ctx); !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
			t.Errorf("%s with a cancelled context = %v, want context.Canceled and ErrNotAcquired", what, err)
		}
	}
	if !r.Valid() {
		t.Fatalf("the reader lost its lock: %v", context.Cause(r.Context()))
	}
	// Close waits for the cleanup of a request the writer gave up on (the
	// server may apply it later). Then the gate and the other slot must
	// be free, while the reader still holds its own.
	closeNow(t, o, writerLocker.Locker)
	rw3 := rwNew(t, newLocker(t), name, cfg)
	r3 := rwRLock(t, o, rw3, "a reader on another Locker after the cancelled Lock (the gate or a slot was left held)")
	rwRelease(t, r3, "second reader")
	rwRelease(t, r, "reader")
	w := rwLock(t, o, rw3, "a writer after the readers left")
	rwRelease(t, w, "writer")
}

// rwFenced runs the writer's Kleppmann scenario with fenced writes
// ("fenced") and with plain writes ("unfenced", the negative control).
func rwFenced(t *testing.T, newLocker NewLocker, opts Options) {
	t.Run("fenced", func(t *testing.T) { rwKleppmann(t, newLocker, opts, true) })
	t.Run("unfenced", func(t *testing.T) { rwKleppmann(t, newLocker, opts, false) })
}

// rwKleppmann: writer A writes while valid, is paused past its leases
// (Expire on its gate lease), B gets the write lock and writes, then A
// resumes and writes with its old token. Fenced, storage refuses A's late
// write; unfenced, it is stored over B's.
func rwKleppmann(t *testing.T, newLocker NewLocker, opts Options, fencing bool) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	if o.NoExpiry {
		t.Log("not run: the Locker cannot expire a paused holder (NoExpiry)")
		return
	}
	name := Key(t)
	var gate atomic.Value // A's gate lease
	spyA := &rwSpy{Locker: newLocker(t), onGrant: func(key string, l distlock.Lease) {
		if key == name+"/gate" {
			gate.Store(l)
		}
	}}
	const slots = 2
	a := rwLock(t, o, rwNew(t, spyA, name, &rwlock.Config{TTL: o.ShortTTL, Readers: slots}), "writer A")
	defer func() { _ = a.Release(context.Background()) }()
	gateA, _ := gate.Load().(distlock.Lease)
	if gateA == nil || gateA.Token() != a.Token() {
		t.Fatalf("writer A's token %d is not its gate lease's (%v)", a.Token(), gateA)
	}
	store := o.Store(t)
	ctx := o.waitCtx(t)
	do := func(w write) error {
		if fencing {
			return store.Write(ctx, w.token, w.value())
		}
		return store.WriteUnfenced(ctx, w.value())
	}
	if err := do(write{token: a.Token(), who: "A-valid"}); err != nil {
		t.Fatalf("writer A's write while its lock is valid: %v", err)
	}

	type result struct {
		w   *rwlock.Write
		err error
	}
	got := make(chan result, 1)
	rwB := rwNew(t, newLocker(t), name, &rwlock.Config{TTL: o.TTL, Readers: slots})
	go func() {
		w, err := rwB.Lock(ctx)
		if err == nil { // check A at once, while Expire may still run
			rwCheckEnded(t, o, a, "when the next writer's Lock returned")
		}
		got <- result{w, err}
	}()
	o.Expire(t, gateA) // A is paused past its leases
	res := <-got
	if res.err != nil {
		t.Fatalf("the next writer's Lock after writer A expired: %v", res.err)
	}
	b := res.w
	defer func() { _ = b.Release(context.Background()) }()
	if b.Token() <= a.Token() {
		t.Fatalf("the next writer's token %d is not above the expired writer's %d", b.Token(), a.Token())
	}
	bw := write{token: b.Token(), who: "B"}
	if err := do(bw); err != nil {
		t.Fatalf("the next writer's write: %v", err)
	}
	late := write{token: a.Token(), who: "A-late"} // A resumes, unaware
	lateErr := do(late)
	final, err := store.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case fencing && !errors.Is(lateErr, fenced.ErrStaleToken):
		t.Errorf("the expired writer's late write (token %d) after the next writer's (token %d) = %v, want fenced.ErrStaleToken; stored %q",
			late.token, bw.token, lateErr, final)
	case fencing && final != bw.value():
		t.Errorf("stored %q, want the next writer's %q", final, bw.value())
	case !fencing && lateErr != nil:
		t.Fatalf("unfenced late write: %v", lateErr)
	case !fencing && final != late.value():
		t.Errorf("negative control: without fencing the expired writer's late write should land over its successor's; stored %q, want %q", final, late.value())
	}
	if err := a.Release(context.Background()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Release of the expired writer's lock = %v, want ErrLeaseLost", err)
	}
	rwRelease(t, b, "the next writer")
}

// rwCheckEnded fails the test unless the write lock w has ended locally:
// Valid false, Context done with a cause matching distlock.ErrLeaseLost
// (waiting up to LossBound for a backend that learns of the loss late).
func rwCheckEnded(t *testing.T, o Options, w *rwlock.Write, when string) {
	t.Helper()
	if o.LossBound > 0 && w.Valid() {
		select {
		case <-w.Context().Done():
		case <-time.After(o.LossBound):
		}
		when = fmt.Sprintf("%s, after the loss bound %v", when, o.LossBound)
	}
	if w.Valid() {
		dl, ok := w.Deadline()
		t.Errorf("%s: the previous writer's lock is still Valid (deadline in %v, has deadline %v): its local validity outlives its lock on the server",
			when, time.Until(dl), ok)
		return
	}
	if w.Context().Err() == nil {
		t.Errorf("%s: Valid() is false but the write lock's context is not done", when)
	} else if c := context.Cause(w.Context()); !errors.Is(c, distlock.ErrLeaseLost) {
		t.Errorf("%s: the previous writer's context cause is %v, want ErrLeaseLost", when, c)
	}
}
