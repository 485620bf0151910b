package distlocktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/observe"
)

// hookLog records the lock events of observe.Hooks. It signals each
// LeaseLost on lost, so a test can wait for the event of a loss that
// another goroutine (a timer, a watcher) reports.
type hookLog struct {
	mu      sync.Mutex
	waits   []observe.LockWaitEvent
	extends []observe.LeaseEvent
	losses  []observe.LeaseEvent
	lost    chan struct{}
}

func newHookLog() *hookLog { return &hookLog{lost: make(chan struct{}, 64)} }

func (r *hookLog) hooks() *observe.Hooks {
	return &observe.Hooks{
		LockWait: func(_ context.Context, e observe.LockWaitEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.waits = append(r.waits, e)
		},
		LeaseExtend: func(_ context.Context, e observe.LeaseEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.extends = append(r.extends, e)
		},
		LeaseLost: func(_ context.Context, e observe.LeaseEvent) {
			r.mu.Lock()
			r.losses = append(r.losses, e)
			r.mu.Unlock()
			select {
			case r.lost <- struct{}{}:
			default:
			}
		},
	}
}

// events returns a copy of the events of key recorded so far.
func (r *hookLog) events(key string) (waits []observe.LockWaitEvent, extends, losses []observe.LeaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.waits {
		if e.Key == key {
			waits = append(waits, e)
		}
	}
	for _, e := range r.extends {
		if e.Key == key {
			extends = append(extends, e)
		}
	}
	for _, e := range r.losses {
		if e.Key == key {
			losses = append(losses, e)
		}
	}
	return waits, extends, losses
}

// checkLeaseEvent fails the test unless e names lease l of a package.
func checkLeaseEvent(t *testing.T, what string, e observe.LeaseEvent, l distlock.Lease) {
	t.Helper()
	if e.Package == "" || e.Key != l.Key() || e.Token != int64(l.Token()) {
		t.Errorf("%s event %+v, want package set, key %q, token %d", what, e, l.Key(), l.Token())
	}
}

// Hooks: a Locker reports to the observe.Hooks of the context given to
// Acquire (observe.WithHooks). An acquisition that succeeds at once, and
// TryAcquire on a held key, report no LockWait; an Acquire that waited
// reports one LockWait with its outcome (an error matching ErrNotAcquired
// and the context's error when it gave up; nil when it acquired); every
// Extend reports a LeaseExtend event with its error; a released lease
// reports no LeaseLost; a lease that expires (Expire) reports one LeaseLost
// with a cause matching ErrLeaseLost. Events carry the package, the key and
// the lease's token. Skipped with Options.NoHooks.
func Hooks(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	if o.NoHooks {
		t.Skip("the Locker does not report to observe.Hooks (Options.NoHooks)")
	}
	l1, l2 := newLocker(t), newLocker(t)
	rec := newHookLog()
	ctx := observe.WithHooks(o.waitCtx(t), rec.hooks())

	// Uncontended Acquire, TryAcquire on a held key, Extend, Release.
	key := Key(t)
	a, err := l1.Acquire(ctx, key, &distlock.Options{TTL: o.TTL})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := l2.TryAcquire(ctx, key, &distlock.Options{TTL: o.TTL}); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire on a held key = %v, want ErrNotAcquired", err)
	}
	if err := a.Extend(ctx, o.TTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}

	// An Acquire that waits for a held key until its context ends.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if b, err := l2.Acquire(wctx, key, &distlock.Options{TTL: o.TTL}); err == nil {
		_ = b.Release(context.Background())
		t.Fatalf("acquired a held key")
	}
	release(t, a)
	waits, extends, losses := rec.events(key)
	if len(waits) != 1 {
		t.Fatalf("LockWait events %+v: want one, for the Acquire that timed out (none for an uncontended Acquire or a TryAcquire)", waits)
	}
	if w := waits[0]; w.Package == "" || w.Attempts < 1 || w.Wait <= 0 ||
		!errors.Is(w.Err, distlock.ErrNotAcquired) || !errors.Is(w.Err, context.DeadlineExceeded) {
		t.Errorf("LockWait of the Acquire that timed out: %+v, want package set, attempts ≥ 1, a wait, and an error matching ErrNotAcquired and context.DeadlineExceeded", w)
	}
	if len(extends) != 1 || extends[0].Err != nil {
		t.Fatalf("LeaseExtend events %+v, want one without error", extends)
	}
	checkLeaseEvent(t, "LeaseExtend", extends[0], a)
	if len(losses) != 0 {
		t.Fatalf("LeaseLost events %+v for a released lease", losses)
	}

	if o.NoExpiry {
		return
	}
	// A lease that expires while a successor waits: one LeaseLost for it,
	// one LockWait (acquired) for the successor.
	key = Key(t)
	a, err = l1.Acquire(ctx, key, &distlock.Options{TTL: o.ShortTTL})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	var expiring atomic.Bool
	type result struct {
		b      distlock.Lease
		err    error
		waited bool // a still held the lock, for sure, when b began
	}
	got := make(chan result, 1)
	go func() {
		dl, timed := a.Deadline()
		waited := !expiring.Load() && a.Valid() && (!timed || time.Until(dl) > o.ShortTTL/2)
		b, err := l2.Acquire(ctx, key, &distlock.Options{TTL: o.TTL})
		got <- result{b, err, waited}
	}()
	expiring.Store(true)
	o.Expire(t, a)
	r := <-got
	if r.err != nil {
		t.Fatalf("successor Acquire: %v", r.err)
	}
	defer release(t, r.b)
	select {
	case <-rec.lost:
	case <-time.After(o.WaitTimeout):
		t.Fatal("no LeaseLost event for the expired lease")
	}
	_ = a.Release(context.Background()) // lost: no event
	waits, _, losses = rec.events(key)
	if len(losses) != 1 || !errors.Is(losses[0].Err, distlock.ErrLeaseLost) {
		t.Fatalf("LeaseLost events %+v, want one, with a cause matching ErrLeaseLost", losses)
	}
	checkLeaseEvent(t, "LeaseLost", losses[0], a)
	switch {
	case len(waits) == 1:
		if w := waits[0]; w.Err != nil || w.Attempts < 1 || w.Wait <= 0 {
			t.Errorf("LockWait of the successor: %+v, want acquired (nil error) after a wait", w)
		}
	case len(waits) == 0 && !r.waited:
		t.Logf("the successor began its Acquire when the holder's lease was nearly over: it need not have waited")
	default:
		t.Errorf("LockWait events of the successor %+v, want one", waits)
	}
}
