package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/internal/backendtest"
	"github.com/concurkit/concurkit/distlock/rwlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/observe"
)

// TestConformance runs distlocktest.RWLock on every lock backend, with
// the backend's shortest TTL for the writer that must lose its lock and,
// on ZooKeeper, an Expire that cuts that writer's Locker off the servers
// until its session expired (backendtest.Options).
func TestConformance(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, backend string, newLocker distlocktest.NewLocker) {
		start := time.Now()
		distlocktest.RWLock(t, newLocker, backendtest.Options(backend))
		t.Logf("%s: %v", backend, time.Since(start).Round(time.Millisecond))
	})
}

// fakeLocker is an in-process Locker whose keys can be made held, failing
// or closed, and whose leases can be lost, to check how the lock reads the
// Locker's errors and what it leaves held.
type fakeLocker struct {
	mu      sync.Mutex
	held    map[string]*fakeLease
	fail    map[string]error // Acquire and TryAcquire of the key fail with it
	relErr  map[string]error // Release of the key's lease fails with it
	closed  bool
	next    fenced.Token
	changed chan struct{} // closed, and replaced, whenever a key is freed
	calls   []fakeCall
	called  chan string // every call, as op + " " + key (buffered)
}

type fakeCall struct {
	op, key string
	opts    distlock.Options
}

func newFake() *fakeLocker {
	return &fakeLocker{
		held: map[string]*fakeLease{}, fail: map[string]error{}, relErr: map[string]error{},
		changed: make(chan struct{}), called: make(chan string, 1<<16),
	}
}

func (f *fakeLocker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return f.acquire(ctx, "Acquire", key, opts, true)
}

func (f *fakeLocker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return f.acquire(ctx, "TryAcquire", key, opts, false)
}

func (f *fakeLocker) acquire(ctx context.Context, op, key string, opts *distlock.Options, wait bool) (distlock.Lease, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{op: op, key: key, opts: *opts})
	f.mu.Unlock()
	select {
	case f.called <- op + " " + key:
	default:
	}
	for {
		f.mu.Lock()
		switch {
		case ctx.Err() != nil:
			f.mu.Unlock()
			return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		case f.closed:
			f.mu.Unlock()
			return nil, fmt.Errorf("%w: %w: fake", distlock.ErrNotAcquired, distlock.ErrClosed)
		case f.fail[key] != nil:
			err := f.fail[key]
			f.mu.Unlock()
			return nil, err
		case f.held[key] == nil:
			f.next++
			lctx, cancel := context.WithCancelCause(context.Background())
			l := &fakeLease{f: f, key: key, token: f.next, ctx: lctx, cancel: cancel, extended: make(chan struct{}, 1<<10)}
			f.held[key] = l
			f.mu.Unlock()
			return l, nil
		case !wait:
			f.mu.Unlock()
			return nil, distlock.ErrNotAcquired
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-changed:
		}
	}
}

// free drops key's lease from the held keys (f.mu is held).
func (f *fakeLocker) free(key string) {
	delete(f.held, key)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeLocker) set(fn func(f *fakeLocker)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// holds returns the keys held, sorted.
func (f *fakeLocker) holds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := slices.Collect(maps.Keys(f.held))
	slices.Sort(keys)
	return keys
}

// drain forgets the calls made so far (for waitCall).
func (f *fakeLocker) drain() {
	for {
		select {
		case <-f.called:
		default:
			return
		}
	}
}

// lease returns the lease held on key, or nil.
func (f *fakeLocker) lease(key string) *fakeLease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[key]
}

// waitCall waits until the Locker is called as call ("Acquire rw/gate").
// A reader asks for slots with TryAcquire only: "Acquire rw/read/…" is a
// writer waiting for a held slot.
func (f *fakeLocker) waitCall(t *testing.T, call string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case c := <-f.called:
			if c == call {
				return
			}
		case <-timeout:
			t.Fatalf("fakeLocker: no call %q within 30s", call)
		}
	}
}

type fakeLease struct {
	f        *fakeLocker
	key      string
	token    fenced.Token
	ctx      context.Context
	cancel   context.CancelCauseFunc
	extended chan struct{} // a token per Extend call
	released bool          // Release returned its outcome once (f.mu)
}

func (l *fakeLease) Key() string                 { return l.key }
func (l *fakeLease) Token() fenced.Token         { return l.token }
func (l *fakeLease) Context() context.Context    { return l.ctx }
func (l *fakeLease) Deadline() (time.Time, bool) { return time.Time{}, false }
func (l *fakeLease) Valid() bool                 { return l.ctx.Err() == nil }

func (l *fakeLease) Extend(context.Context, time.Duration) error {
	l.extended <- struct{}{}
	if l.ctx.Err() != nil {
		return distlock.ErrLeaseLost
	}
	return nil
}

func (l *fakeLease) Release(context.Context) error {
	lost := l.ctx.Err() != nil && !errors.Is(context.Cause(l.ctx), distlock.ErrReleased)
	l.cancel(distlock.ErrReleased)
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	if l.f.held[l.key] == l {
		l.f.free(l.key)
	}
	if l.released { // as distlock.Lease: releasing twice returns nil
		return nil
	}
	l.released = true
	if err := l.f.relErr[l.key]; err != nil {
		return err
	}
	if lost {
		return distlock.ErrLeaseLost
	}
	return nil
}

// lose ends the lease as a backend does when the lock is lost, and frees
// its key.
func (l *fakeLease) lose() {
	l.cancel(fmt.Errorf("%w: fake", distlock.ErrLeaseLost))
	l.f.set(func(f *fakeLocker) {
		if f.held[l.key] == l {
			f.free(l.key)
		}
	})
}

var errDown = errors.New("server down")

func mustNew(t *testing.T, l distlock.Locker, cfg *rwlock.Config) *rwlock.RWLock {
	t.Helper()
	rw, err := rwlock.New(l, "rw", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rw
}

// TestLockFailureRollsBack: a slot whose request fails ends Lock with
// that error, naming the key, and every lease taken is released.
func TestLockFailureRollsBack(t *testing.T) {
	f := newFake()
	f.set(func(f *fakeLocker) { f.fail["rw/read/2"] = errDown })
	w, err := mustNew(t, f, &rwlock.Config{Readers: 4}).Lock(t.Context())
	if w != nil || !errors.Is(err, errDown) || errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("Lock with a slot down = (%v, %v), want the slot's error (and not ErrNotAcquired)", w, err)
	}
	if !strings.Contains(err.Error(), `"rw/read/2"`) {
		t.Errorf("error %q does not name the failed slot", err)
	}
	if held := f.holds(); len(held) != 0 {
		t.Errorf("after the failed Lock, %q are held", held)
	}
}

// TestLockCancelledRollsBack: a Lock cancelled while it waits for a held
// slot returns ctx's error with ErrNotAcquired and releases what it took;
// the other slots were taken before the wait, the held one is waited for
// last.
func TestLockCancelledRollsBack(t *testing.T) {
	f := newFake()
	reader := mustNew(t, f, &rwlock.Config{Readers: 3})
	r, err := reader.RLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var slot string
	for _, c := range f.calls {
		if c.op == "TryAcquire" && strings.HasPrefix(c.key, "rw/read/") {
			slot = c.key
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := mustNew(t, f, &rwlock.Config{Readers: 3}).Lock(ctx)
		errc <- err
	}()
	f.waitCall(t, "Acquire "+slot) // the writer took the others and waits
	if held := len(f.holds()); held != 4 {
		t.Errorf("while the writer waits for %q, %d keys are held, want 4 (the gate and every slot)", slot, held)
	}
	cancel()
	err = <-errc
	if !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("cancelled Lock = %v, want context.Canceled and ErrNotAcquired", err)
	}
	if held := f.holds(); len(held) != 1 || held[0] != slot {
		t.Errorf("after the cancelled Lock, %q are held, want only the reader's %q", held, slot)
	}
	_ = r.Release(t.Context())
}

// TestLockLeaseLostWhileWaiting: a lease lost while Lock waits for a
// later slot ends the wait; the error matches ErrNotAcquired and the
// lease's cause, not context.Canceled (the caller did not cancel).
func TestLockLeaseLostWhileWaiting(t *testing.T) {
	f := newFake()
	f.set(func(f *fakeLocker) { f.held["rw/read/1"] = &fakeLease{} })
	errc := make(chan error, 1)
	go func() {
		_, err := mustNew(t, f, &rwlock.Config{Readers: 2}).Lock(t.Context())
		errc <- err
	}()
	f.waitCall(t, "Acquire rw/read/1") // waiting
	f.lease("rw/gate").lose()
	err := <-errc
	if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, distlock.ErrLeaseLost) || errors.Is(err, context.Canceled) {
		t.Fatalf("Lock whose gate was lost while it waited = %v, want ErrNotAcquired and ErrLeaseLost, not context.Canceled", err)
	}
	if held := f.holds(); len(held) != 1 || held[0] != "rw/read/1" {
		t.Errorf("after the failed Lock, %q are held, want only the other holder's rw/read/1", held)
	}
}

// TestLockRenewsWhileWaiting: without AutoExtend, Lock extends the leases
// it took while it waits for a held slot (every TTL/3).
func TestLockRenewsWhileWaiting(t *testing.T) {
	f := newFake()
	f.set(func(f *fakeLocker) { f.held["rw/read/1"] = &fakeLease{} })
	got := make(chan *rwlock.Write, 1)
	go func() {
		w, err := mustNew(t, f, &rwlock.Config{Readers: 2, TTL: 30 * time.Millisecond}).Lock(t.Context())
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	f.waitCall(t, "Acquire rw/read/1")
	for _, key := range []string{"rw/gate", "rw/read/0"} {
		l := f.lease(key)
		for range 2 {
			select {
			case <-l.extended:
			case <-time.After(30 * time.Second):
				t.Fatalf("the lease of %q was not extended while Lock waited", key)
			}
		}
	}
	f.set(func(f *fakeLocker) { f.free("rw/read/1") })
	w := <-got
	if w == nil {
		t.FailNow()
	}
	if err := w.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestRLockDoesNotHoldGateWhileWaiting: a reader that finds every slot
// held releases the gate before it backs off (for up to an hour here), so
// a writer takes the gate meanwhile.
func TestRLockDoesNotHoldGateWhileWaiting(t *testing.T) {
	f := newFake()
	f.set(func(f *fakeLocker) { f.held["rw/read/0"], f.held["rw/read/1"] = &fakeLease{}, &fakeLease{} })
	rctx, rcancel := context.WithCancel(t.Context())
	rerr := make(chan error, 1)
	go func() {
		_, err := mustNew(t, f, &rwlock.Config{Readers: 2, PollMin: time.Hour, PollMax: time.Hour}).RLock(rctx)
		rerr <- err
	}()
	for _, c := range []string{"Acquire rw/gate", "TryAcquire rw/read/", "TryAcquire rw/read/"} {
		select {
		case got := <-f.called:
			if !strings.HasPrefix(got, c) {
				t.Fatalf("the reader's round called %q, want %q…", got, c)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the reader made no round")
		}
	}
	wctx, wcancel := context.WithCancel(t.Context())
	werr := make(chan error, 1)
	go func() {
		_, err := mustNew(t, f, &rwlock.Config{Readers: 2}).Lock(wctx)
		werr <- err
	}()
	f.waitCall(t, "Acquire rw/read/0") // the writer holds the gate
	wcancel()
	if err := <-werr; !errors.Is(err, context.Canceled) {
		t.Fatalf("writer = %v, want it cancelled while waiting for the slots", err)
	}
	rcancel()
	if err := <-rerr; !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("reader cancelled in its backoff = %v, want context.Canceled and ErrNotAcquired", err)
	}
	if held := f.holds(); !slices.Equal(held, []string{"rw/read/0", "rw/read/1"}) {
		t.Errorf("after both gave up, %q are held, want only the other holders' slots", held)
	}
}

// TestRLockErrors: how a reader reads the Locker's errors.
func TestRLockErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(f *fakeLocker)
		want    []error
		notWant []error
		names   string // the error names it
	}{
		{
			name:    "every slot down",
			setup:   func(f *fakeLocker) { f.fail["rw/read/0"], f.fail["rw/read/1"] = errDown, errDown },
			want:    []error{errDown},
			notWant: []error{distlock.ErrNotAcquired},
			names:   `read slot "rw/read/`,
		},
		{
			name:    "gate down",
			setup:   func(f *fakeLocker) { f.fail["rw/gate"] = errDown },
			want:    []error{errDown},
			notWant: []error{distlock.ErrNotAcquired},
			names:   `gate "rw/gate"`,
		},
		{
			name:  "closed",
			setup: func(f *fakeLocker) { f.closed = true },
			want:  []error{distlock.ErrClosed, distlock.ErrNotAcquired},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.set(tc.setup)
			r, err := mustNew(t, f, &rwlock.Config{Readers: 2, PollMin: time.Hour, PollMax: time.Hour}).RLock(t.Context())
			if r != nil {
				t.Fatal("RLock got a read lock")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("RLock = %v, want it to match %v", err, w)
				}
			}
			for _, w := range tc.notWant {
				if errors.Is(err, w) {
					t.Errorf("RLock = %v, want it not to match %v", err, w)
				}
			}
			if tc.names != "" && !strings.Contains(err.Error(), tc.names) {
				t.Errorf("error %q does not name %s", err, tc.names)
			}
			if held := f.holds(); len(held) != 0 {
				t.Errorf("after the failed RLock, %q are held", held)
			}
		})
	}
}

// TestConfigPassed: TTL and AutoExtend reach the Locker for the slots and
// the writer's gate; a reader's brief hold of the gate is never
// auto-extended; a nil Config passes zero options; the caller's Config is
// not modified.
func TestConfigPassed(t *testing.T) {
	f := newFake()
	cfg := &rwlock.Config{TTL: 3 * time.Second, AutoExtend: true, Readers: 1}
	rw := mustNew(t, f, cfg)
	r, err := rw.RLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Release(t.Context())
	w, err := rw.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Release(t.Context())
	if *cfg != (rwlock.Config{TTL: 3 * time.Second, AutoExtend: true, Readers: 1}) {
		t.Errorf("New modified the Config: %+v", *cfg)
	}
	full, brief := distlock.Options{TTL: 3 * time.Second, AutoExtend: true}, distlock.Options{TTL: 3 * time.Second}
	want := []fakeCall{
		{"Acquire", "rw/gate", brief}, {"TryAcquire", "rw/read/0", full},
		{"Acquire", "rw/gate", full}, {"TryAcquire", "rw/read/0", full},
	}
	if fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Errorf("calls %+v, want %+v", f.calls, want)
	}
	f.calls = nil
	r, err = mustNew(t, f, nil).RLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Release(t.Context())
	for _, c := range f.calls {
		if c.opts != (distlock.Options{}) {
			t.Errorf("%s %q with a nil Config got options %+v, want the zero value (the backend's defaults)", c.op, c.key, c.opts)
		}
	}
}

// TestHold: a Write's Context ends with the cause of the first lease
// lost, naming its key; Release attempts every lease and joins the
// errors; a second Release returns nil; Extend reaches every lease.
func TestHold(t *testing.T) {
	f := newFake()
	rw := mustNew(t, f, &rwlock.Config{Readers: 3})
	w, err := rw.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if w.Token() != f.lease("rw/gate").Token() {
		t.Errorf("writer token %d, want the gate lease's %d", w.Token(), f.lease("rw/gate").Token())
	}
	if err := w.Extend(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"rw/gate", "rw/read/0", "rw/read/1", "rw/read/2"} {
		if n := len(f.lease(key).extended); n != 1 {
			t.Errorf("Extend reached the lease of %q %d times, want once", key, n)
		}
	}
	if err := w.Extend(t.Context(), -time.Second); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Extend(-1s) = %v, want ErrInvalidArgument", err)
	}
	f.lease("rw/read/1").lose()
	select {
	case <-w.Context().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the Write's context did not end with a lost slot")
	}
	if c := context.Cause(w.Context()); !errors.Is(c, distlock.ErrLeaseLost) || !strings.Contains(c.Error(), `"rw/read/1"`) {
		t.Errorf("cause %v, want ErrLeaseLost naming rw/read/1", c)
	}
	if w.Valid() {
		t.Error("Valid with a lost slot")
	}
	f.set(func(f *fakeLocker) { f.relErr["rw/read/2"] = errDown })
	err = w.Release(t.Context())
	if !errors.Is(err, errDown) || !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Release = %v, want the failed release (server down) and the lost slot joined", err)
	}
	if held := f.holds(); len(held) != 0 {
		t.Errorf("after Release, %q are held: every lease must be released", held)
	}
	if err := w.Release(t.Context()); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	// The RWLock forgot the Write although its Release failed.
	if r, err := rw.RLock(t.Context()); err != nil {
		t.Errorf("RLock after the Write's Release: %v", err)
	} else {
		if !errors.Is(context.Cause(w.Context()), distlock.ErrLeaseLost) {
			t.Errorf("the cause changed after Release: %v", context.Cause(w.Context()))
		}
		_ = r.Release(t.Context())
	}
}

// TestReadReleaseCause: a released Read's Context ends with
// distlock.ErrReleased.
func TestReadReleaseCause(t *testing.T) {
	f := newFake()
	r, err := mustNew(t, f, &rwlock.Config{Readers: 1}).RLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := context.Cause(r.Context()); !errors.Is(c, distlock.ErrReleased) || r.Valid() {
		t.Errorf("after Release: cause %v, Valid %v; want ErrReleased and false", c, r.Valid())
	}
}

// TestUpgradeAcrossGoroutines: the refusal is per *RWLock, whichever
// goroutine holds the read (documented); another *RWLock of the same
// name is not refused, it waits.
func TestUpgradeAcrossGoroutines(t *testing.T) {
	f := newFake()
	rw := mustNew(t, f, &rwlock.Config{Readers: 1})
	got := make(chan *rwlock.Read, 1)
	go func() {
		r, err := rw.RLock(t.Context())
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	r := <-got
	if r == nil {
		t.FailNow()
	}
	if _, err := rw.Lock(t.Context()); !errors.Is(err, rwlock.ErrUpgrade) {
		t.Errorf("Lock while another goroutine holds a read of the same RWLock = %v, want ErrUpgrade", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := mustNew(t, f, &rwlock.Config{Readers: 1}).Lock(ctx)
		errc <- err
	}()
	f.waitCall(t, "Acquire rw/read/0") // waiting for the reader
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("another RWLock's Lock = %v, want it to wait until cancelled", err)
	}
	_ = r.Release(t.Context())
}

// TestLockWaitReported: an RLock that found every slot held reports one
// LockWait event under the lock's name; one that did not wait reports
// none.
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
	rw := mustNew(t, f, &rwlock.Config{Readers: 1, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	first, err := rw.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *rwlock.Read, 1)
	go func() {
		r, err := rw.RLock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	f.drain()
	for range 2 { // two rounds found the slot held
		f.waitCall(t, "Acquire rw/gate")
	}
	_ = first.Release(ctx)
	if r := <-got; r != nil {
		_ = r.Release(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Package != "rwlock" || events[0].Key != "rw" || events[0].Err != nil || events[0].Attempts < 2 {
		t.Fatalf("LockWait events %+v, want one for \"rw\" of package rwlock, acquired after 2 or more rounds", events)
	}
}
