package rwlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/distlock/internal/sentinel"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/retry"
)

// pkg names the package in errors and observe events.
const pkg = "rwlock"

// Defaults and limits of Config.
const (
	// DefaultReaders is the number of reader slots when Config.Readers is
	// zero: at most 16 readers hold the lock at once.
	DefaultReaders = 16
	// MaxReaders is the largest Config.Readers New accepts. A writer
	// takes every slot, one request after the other, so a lock with
	// thousands of slots would make every write cost thousands of
	// acquisitions.
	MaxReaders = 1024
	// DefaultPollMin and DefaultPollMax bound the backoff of a reader
	// that found every slot held (Config.PollMin, PollMax).
	DefaultPollMin = 20 * time.Millisecond
	DefaultPollMax = 500 * time.Millisecond
)

// Errors of the calls that would wait for a hold of their own *RWLock.
// Each has an ErrorType method, so observe.ErrorType reports it by a
// stable name (given in brackets). Neither matches
// distlock.ErrNotAcquired: trying again cannot help until the hold is
// released.
var (
	// ErrUpgrade ["upgrade"] is returned by Lock, at once and without
	// any I/O, when the same *RWLock holds a read lock (a Read not yet
	// released): the writer would wait for the reader slot of its own
	// read, forever. Upgrade by releasing the read, then Lock, then
	// reading again what the decision rested on: another writer may have
	// written in between. Across processes, or across *RWLock values, an
	// upgrade cannot be detected: a writer that holds a read of another
	// *RWLock of the same name waits until that read's lease ends (with
	// AutoExtend, until its own ctx ends).
	ErrUpgrade error = sentinel.New("rwlock: write lock requested while holding a read lock", "upgrade")
	// ErrReentrant ["reentrant"] is returned by Lock and RLock, at once
	// and without any I/O, when the same *RWLock holds the write lock (a
	// Write not yet released): both would wait for the writer's gate,
	// held by the caller itself.
	ErrReentrant error = sentinel.New("rwlock: lock requested while holding the write lock", "reentrant")
)

// Config tunes an RWLock. A nil *Config, and every zero field, means the
// documented default; New copies what it needs and never modifies it.
type Config struct {
	// TTL is the validity of every lease the lock takes (distlock.Options.TTL:
	// each backend documents what it means, e.g. a key expiry or a session
	// timeout). A reader or writer that dies frees its slots and the gate
	// within about one TTL. Zero means distlock.DefaultTTL.
	TTL time.Duration
	// AutoExtend is passed to distlock.Options for the leases of a hold
	// (a reader's slot; a writer's gate and slots): each is extended every
	// TTL/3 until it is released or lost. Off by default. Whatever it
	// says, Lock keeps the leases it took alive while it waits for the
	// remaining slots, and a reader's brief hold of the gate is never
	// auto-extended.
	AutoExtend bool
	// Readers is the number of reader slots: at most Readers readers hold
	// the lock at once, and a writer takes Readers+1 leases (the gate and
	// every slot). Zero means DefaultReaders (16); negative or above
	// MaxReaders (1024) is bad input. Every RWLock of one name must use
	// the same number: a reader that believes in more slots takes keys a
	// writer never asks for, and is not excluded by it.
	Readers int
	// PollMin and PollMax bound the backoff of a reader that found every
	// slot held: after the n-th such round it waits a random delay in
	// [0, min(PollMax, PollMin·2^(n-1))] (full jitter), without holding
	// the gate, then queues at the gate again. Zero means DefaultPollMin
	// (20ms) and DefaultPollMax (500ms).
	PollMin, PollMax time.Duration
}

// RWLock is a distributed read-write lock named by a string, on the locks
// of a distlock.Locker (see the package documentation). Make one with
// New; its methods are safe for concurrent use.
//
// The lock itself lives on the lock service: RWLocks with the same name,
// Readers and lock service — in one process or many — exclude each other.
// An *RWLock also remembers the holds it handed out and has not seen
// released, to refuse at once the calls that would wait for one of them
// (ErrUpgrade, ErrReentrant). It cannot tell goroutines apart: one that
// calls Lock while another goroutine holds a read of the same *RWLock is
// refused too. Give every participant that reads and writes on its own
// (a request, a job) its own *RWLock: New does no I/O.
type RWLock struct {
	locker    distlock.Locker
	name      string
	gate      string   // the gate's lock key
	slots     []string // the reader slots' lock keys, by index
	writeKeys []string // gate, then every slot: a writer's lock order
	opts      distlock.Options
	gateOpts  distlock.Options // a reader's brief hold of the gate
	every     time.Duration    // Lock's renewal interval while it waits
	pollMin   time.Duration
	pollMax   time.Duration

	mu     sync.Mutex
	reads  int // Reads handed out and not released
	writes int // Writes handed out and not released
}

// New returns the read-write lock name on the locks of l, with
// cfg.Readers reader slots: its keys are name + "/gate" and
// name + "/read/" + i for i < Readers. cfg may be nil (the defaults). It
// does no I/O.
//
// It returns an error matching concurkit.ErrInvalidArgument for a nil l
// (also a typed nil, such as a nil *pglock.Locker), an empty name,
// Readers below 0 or above MaxReaders, a negative TTL, PollMin or
// PollMax, or PollMin above PollMax (after defaults). Keys the backend
// cannot store (too long, not UTF-8) are reported by the first
// acquisition, as distlock.ErrInvalidKey.
func New(l distlock.Locker, name string, cfg *Config) (*RWLock, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case handle.IsNil(l):
		return nil, fmt.Errorf("%w: %s: nil Locker", concurkit.ErrInvalidArgument, pkg)
	case name == "":
		return nil, fmt.Errorf("%w: %s: empty name", concurkit.ErrInvalidArgument, pkg)
	case c.Readers < 0 || c.Readers > MaxReaders:
		return nil, fmt.Errorf("%w: %s: %d readers, want 1 to %d (0: %d)", concurkit.ErrInvalidArgument, pkg, c.Readers, MaxReaders, DefaultReaders)
	case c.TTL < 0:
		return nil, fmt.Errorf("%w: %s: TTL %v < 0", concurkit.ErrInvalidArgument, pkg, c.TTL)
	case c.PollMin < 0 || c.PollMax < 0:
		return nil, fmt.Errorf("%w: %s: negative PollMin %v or PollMax %v", concurkit.ErrInvalidArgument, pkg, c.PollMin, c.PollMax)
	}
	if c.Readers == 0 {
		c.Readers = DefaultReaders
	}
	if c.PollMin == 0 {
		c.PollMin = DefaultPollMin
	}
	if c.PollMax == 0 {
		c.PollMax = max(DefaultPollMax, c.PollMin)
	}
	if c.PollMin > c.PollMax {
		return nil, fmt.Errorf("%w: %s: PollMin %v > PollMax %v", concurkit.ErrInvalidArgument, pkg, c.PollMin, c.PollMax)
	}
	rw := &RWLock{
		locker:   l,
		name:     name,
		gate:     name + "/gate",
		slots:    make([]string, c.Readers),
		opts:     distlock.Options{TTL: c.TTL, AutoExtend: c.AutoExtend},
		gateOpts: distlock.Options{TTL: c.TTL},
		every:    orDefault(c.TTL, distlock.DefaultTTL) / 3,
		pollMin:  c.PollMin,
		pollMax:  c.PollMax,
	}
	for i := range rw.slots {
		rw.slots[i] = name + "/read/" + strconv.Itoa(i)
	}
	rw.writeKeys = append([]string{rw.gate}, rw.slots...)
	return rw, nil
}

// orDefault returns d, or def when d is zero.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Name returns the lock's name ("" for a nil RWLock).
func (rw *RWLock) Name() string {
	if rw == nil {
		return ""
	}
	return rw.name
}

// Readers returns the number of reader slots: the most readers that hold
// the lock at once (0 for a nil RWLock).
func (rw *RWLock) Readers() int {
	if rw == nil {
		return 0
	}
	return len(rw.slots)
}

// check rejects a nil RWLock or one not made by New, before any I/O.
func (rw *RWLock) check() error {
	if rw == nil || len(rw.slots) == 0 {
		return fmt.Errorf("%w: %s: nil or zero RWLock (use New)", concurkit.ErrInvalidArgument, pkg)
	}
	return nil
}

// refuse returns ErrReentrant when rw holds the write lock, and, for a
// writer, ErrUpgrade when it holds a read lock.
func (rw *RWLock) refuse(writer bool) error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	switch {
	case rw.writes > 0:
		return fmt.Errorf("%w: %s %q", ErrReentrant, pkg, rw.name)
	case writer && rw.reads > 0:
		return fmt.Errorf("%w: %s %q: %d read locks of this RWLock are held (release them, Lock, then read again)", ErrUpgrade, pkg, rw.name, rw.reads)
	}
	return nil
}

// count adds n to the holds of one kind that rw remembers.
func (rw *RWLock) count(writer bool, n int) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if writer {
		rw.writes += n
	} else {
		rw.reads += n
	}
}

// RLock blocks until the caller holds a read lock or ctx ends. It queues
// at the gate behind a writer that holds it (Locker.Acquire), takes a free
// reader slot (one round of Locker.TryAcquire over the slots, from a
// random one) and releases the gate. When every slot was held it releases
// the gate too, waits a random delay bounded by Config.PollMin and
// PollMax, and queues again: it never holds the gate while it waits for a
// slot, so that a writer can take the gate meanwhile.
//
// The Read holds the slot's lease alone. A failed release of the gate
// does not fail RLock (the reader holds its slot): the server frees the
// gate at its TTL at the latest, and a writer waits that long.
//
// It returns errors.Join(distlock.ErrNotAcquired, ctx.Err()) when ctx
// ends first (joined also with the failures of the last round, if any: a
// slot whose server did not answer); the Locker's error for the gate,
// naming it, when that fails for another reason (the Locker closed,
// distlock.ErrClosed; a server down); the errors of a round in which
// every slot request failed (waiting would not help), which do not match
// ErrNotAcquired; ErrReentrant when this RWLock holds the write lock; and
// concurkit.ErrInvalidArgument for a nil RWLock.
//
// An RLock whose first round found every slot held reports its wait to
// the hooks of ctx (observe.Hooks.LockWait, with Package "rwlock" and Key
// the lock's name); a wait at the gate is reported by the backend, with
// the gate's key.
func (rw *RWLock) RLock(ctx context.Context) (_ *Read, err error) {
	if err := rw.check(); err != nil {
		return nil, err
	}
	if err := rw.refuse(false); err != nil {
		return nil, err
	}
	var (
		start  = time.Now()
		waited bool
		timer  *time.Timer
		n      int
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if waited {
			lease.ReportWait(ctx, pkg, rw.name, start, n, err)
		}
	}()
	backoff := retry.Policy{BaseDelay: rw.pollMin, MaxDelay: rw.pollMax}
	var failed []error // of the last complete round: slots whose request failed
	for n = 1; ; n++ {
		l, busy, f, err := rw.readRound(ctx)
		switch {
		case l != nil:
			h := newHold(rw, false, 1)
			h.add(l.Key(), l)
			rw.count(false, 1)
			return &Read{h: h}, nil
		case err != nil && ctx.Err() != nil:
			return nil, errors.Join(append([]error{err}, failed...)...)
		case err != nil:
			return nil, err
		case busy == 0: // every request failed: nothing to wait for
			return nil, errors.Join(f...)
		}
		waited, failed = true, f
		d := backoff.Backoff(n)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(append([]error{distlock.ErrNotAcquired, ctx.Err()}, failed...)...)
		case <-timer.C:
		}
	}
}

// readRound takes the gate, asks for each slot once, from a random one,
// until one is granted, and releases the gate. It returns the slot's
// lease; otherwise busy counts the slots held by others and failed has
// the errors of the requests that failed for another reason, each naming
// its slot. err is set, and the round cut short, when waiting cannot
// help: ctx ended (matching distlock.ErrNotAcquired and ctx.Err()), the
// gate could not be taken, or the Locker was closed.
func (rw *RWLock) readRound(ctx context.Context) (_ distlock.Lease, busy int, failed []error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	gopts := rw.gateOpts // a copy per call, so that no Locker can change the next call's
	gate, err := rw.locker.Acquire(ctx, rw.gate, &gopts)
	if err == nil && handle.IsNil(gate) {
		err = fmt.Errorf("%s: %T.Acquire returned neither a lease nor an error", pkg, rw.locker)
	}
	if err != nil {
		if !handle.IsNil(gate) { // a Locker must not return both; do not leak it
			cleanup(ctx, gate)
		}
		return nil, 0, nil, withCtx(ctx, fmt.Errorf("%s %q: gate %q: %w", pkg, rw.name, rw.gate, err))
	}
	// Released before RLock returns: a reader holds the gate only for the
	// length of this round, so a writer waits at the gate at most that
	// long for each reader ahead of it.
	defer cleanup(ctx, gate)
	n := len(rw.slots)
	first := rand.IntN(n)
	for i := range n {
		key := rw.slots[(first+i)%n]
		opts := rw.opts
		l, err := rw.locker.TryAcquire(ctx, key, &opts)
		if err == nil && handle.IsNil(l) {
			err = fmt.Errorf("%s: %T.TryAcquire returned neither a lease nor an error", pkg, rw.locker)
		}
		if err != nil && !handle.IsNil(l) {
			cleanup(ctx, l)
		}
		switch {
		case err == nil:
			return l, 0, nil, nil
		case errors.Is(err, distlock.ErrClosed):
			return nil, 0, nil, err // every other slot would say the same
		case ctx.Err() != nil:
			return nil, 0, nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		case errors.Is(err, distlock.ErrNotAcquired):
			busy++
		default:
			failed = append(failed, fmt.Errorf("%s: read slot %q: %w", pkg, key, err))
		}
	}
	return nil, busy, failed, nil
}

// cleanup releases l with a context that ignores ctx's cancellation and
// ends after distlock.DefaultCleanupTimeout, and returns the release's
// error.
func cleanup(ctx context.Context, l distlock.Lease) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), distlock.DefaultCleanupTimeout)
	defer cancel()
	return l.Release(rctx)
}

// withCtx returns err, made to match distlock.ErrNotAcquired and
// ctx.Err() when ctx has ended, whatever the Locker wrapped.
func withCtx(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil {
		return err
	}
	errs := []error{err}
	if !errors.Is(err, distlock.ErrNotAcquired) {
		errs = append(errs, distlock.ErrNotAcquired)
	}
	if !errors.Is(err, cerr) {
		errs = append(errs, cerr)
	}
	if len(errs) == 1 {
		return err
	}
	return errors.Join(errs...)
}

// Lock blocks until the caller holds the write lock or ctx ends. It takes
// the gate (Locker.Acquire) and keeps it, so that readers arriving after
// it queue behind it, then takes every reader slot: the free ones at once
// (one round of Locker.TryAcquire, in index order), then each slot still
// held, in index order, with a blocking Locker.Acquire. It waits only for
// the readers already inside to leave, and waits for all of them at once
// (a backend that judges a dead holder by watching its record, as
// dynamolock does, starts watching every held slot in the first round).
// While it waits, it extends the leases it holds every TTL/3 (even
// without Config.AutoExtend), so that a long wait — a slow reader, or one
// that died and frees its slot only at its TTL — does not cost it the
// gate.
//
// The Write holds the gate and every slot; its Token is the gate lease's.
//
// On failure nothing is held: the leases already taken are released, in
// reverse order, with a context that ignores ctx's cancellation and is
// bounded by distlock.DefaultCleanupTimeout. The error names the key that
// failed and wraps the Locker's error; it matches distlock.ErrNotAcquired
// and ctx.Err() when ctx ended; it matches ErrNotAcquired and the lease's
// cause (distlock.ErrLeaseLost) when a lease already taken ended before
// the last slot was; and it joins the error of every release of the
// rollback that could not be confirmed (concurkit.ErrOutcomeUnknown: the
// server frees that key at its TTL at the latest). Lock returns ErrUpgrade
// when this RWLock holds a read lock, ErrReentrant when it holds the write
// lock, and concurkit.ErrInvalidArgument for a nil RWLock, all at once.
//
// The waits are reported to the hooks of ctx by the backend, per key
// (the gate's, then each slot's).
func (rw *RWLock) Lock(ctx context.Context) (*Write, error) {
	if err := rw.check(); err != nil {
		return nil, err
	}
	if err := rw.refuse(true); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	h := newHold(rw, true, len(rw.writeKeys))
	// The wait for a slot ends when ctx ends or when a lease already taken
	// ends: the hold could not be complete.
	wctx, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	unwatch := context.AfterFunc(h.ctx, func() { stopWait(context.Cause(h.ctx)) })
	defer unwatch()
	stopRenewing := func() {}
	if !rw.opts.AutoExtend {
		stopRenewing = h.renew(ctx, rw.every)
	}
	// The gate first, then one round of TryAcquire over the slots (the
	// free ones are taken at once), then a blocking Acquire of each slot
	// still held, in index order. The round lets every wait start at
	// once: dynamolock, for one, judges a holder dead only after its
	// Locker watched the holder's record for a TTL, and a slot first
	// looked at after the wait for the previous one would add a TTL per
	// dead reader.
	var held []int // indexes in rw.writeKeys of the slots found held
	for i, key := range rw.writeKeys {
		wait := i == 0
		if err := h.take(wctx, key, wait); err != nil {
			if !wait && errors.Is(err, distlock.ErrNotAcquired) && wctx.Err() == nil && !errors.Is(err, distlock.ErrClosed) {
				held = append(held, i)
				continue
			}
			stopRenewing()
			unwatch()
			return nil, h.rollback(ctx, h.failure(ctx, key, i, err))
		}
	}
	for _, i := range held {
		key := rw.writeKeys[i]
		if err := h.take(wctx, key, true); err != nil {
			stopRenewing()
			unwatch()
			return nil, h.rollback(ctx, h.failure(ctx, key, i, err))
		}
	}
	stopRenewing()
	// A lease whose deadline passed while a later slot was taken may not
	// have seen its timer fire yet: Valid reads the clock.
	if !h.valid() {
		unwatch()
		return nil, h.rollback(ctx, h.failure(ctx, "", len(rw.writeKeys), nil))
	}
	rw.count(true, 1)
	return &Write{h: h}, nil
}

// hold is what Read and Write share: the leases of one hold, and a
// context that ends with the first of them.
type hold struct {
	rw     *RWLock
	writer bool
	ctx    context.Context
	end    context.CancelCauseFunc

	// mu guards keys, leases and stops while Lock adds to them (renew
	// reads them meanwhile); once the hold is handed out they do not
	// change.
	mu     sync.Mutex
	keys   []string
	leases []distlock.Lease
	stops  []func() bool // deregister the watches of the leases' contexts

	forget sync.Once // rw forgets the hold once
}

// take acquires key for the hold, with Acquire when wait is set, else
// with TryAcquire, and adds its lease.
func (h *hold) take(ctx context.Context, key string, wait bool) error {
	opts := h.rw.opts // a copy per call, so that no Locker can change the next call's
	var (
		l   distlock.Lease
		err error
	)
	if wait {
		l, err = h.rw.locker.Acquire(ctx, key, &opts)
	} else {
		l, err = h.rw.locker.TryAcquire(ctx, key, &opts)
	}
	if err == nil && handle.IsNil(l) {
		err = fmt.Errorf("%s: %T returned neither a lease nor an error", pkg, h.rw.locker)
	}
	switch {
	case err == nil:
		h.add(key, l)
	case !handle.IsNil(l): // a Locker must not return both; do not leak it
		_ = cleanup(ctx, l)
	}
	return err
}

// newHold returns an empty hold with room for n leases.
func newHold(rw *RWLock, writer bool, n int) *hold {
	h := &hold{rw: rw, writer: writer, keys: make([]string, 0, n), leases: make([]distlock.Lease, 0, n)}
	h.ctx, h.end = context.WithCancelCause(context.Background())
	return h
}

// add appends the lease of key and makes the hold's context end with
// that lease's.
func (h *hold) add(key string, l distlock.Lease) {
	lctx := l.Context()
	stop := context.AfterFunc(lctx, func() { h.end(leaseCause(key, lctx)) })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keys = append(h.keys, key)
	h.leases = append(h.leases, l)
	h.stops = append(h.stops, stop)
}

// snapshot returns the leases taken so far.
func (h *hold) snapshot() []distlock.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]distlock.Lease(nil), h.leases...)
}

// renew extends the leases taken so far every interval until the
// returned stop is called (and returns once the renewing goroutine has
// ended). A failed extension needs no handling here: a lease that is
// lost ends its context, and with it the hold's, which ends Lock's wait.
func (h *hold) renew(ctx context.Context, every time.Duration) (stop func()) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-tick.C:
			}
			for _, l := range h.snapshot() {
				_ = l.Extend(rctx, 0)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// leaseCause is the cause the hold's context ends with when the lease of
// key ended: the lease's own, naming the key. Release ends the hold's
// context first, with distlock.ErrReleased, so this is a loss.
func leaseCause(key string, lctx context.Context) error {
	cause := context.Cause(lctx)
	if cause == nil || (errors.Is(cause, context.Canceled) && !errors.Is(cause, distlock.ErrReleased)) {
		// A Locker that does not say why: it ended without our Release.
		cause = errors.Join(distlock.ErrLeaseLost, cause)
	}
	return fmt.Errorf("%s: lease of %q ended: %w", pkg, key, cause)
}

// failure builds the error of a Lock that failed at key (the i-th of the
// writer's keys) with err, or, with err nil, after every key was taken
// but a lease had already ended.
func (h *hold) failure(ctx context.Context, key string, i int, err error) error {
	lost := context.Cause(h.ctx) // non-nil: a lease taken earlier ended
	n := len(h.rw.writeKeys)
	if err == nil {
		return errors.Join(fmt.Errorf("%s %q: a lease ended before the write lock was complete: %w", pkg, h.rw.name, distlock.ErrNotAcquired), lost)
	}
	err = fmt.Errorf("%s %q: acquire %q (key %d of %d): %w", pkg, h.rw.name, key, i+1, n, err)
	if lost != nil && ctx.Err() == nil {
		// Our own wait context ended because a lease was lost: its
		// context.Canceled is not the caller's doing and must not read
		// as if it were.
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%s %q: wait for %q (key %d of %d) given up: %w", pkg, h.rw.name, key, i+1, n, distlock.ErrNotAcquired)
		}
		return errors.Join(err, lost)
	}
	return errors.Join(withCtx(ctx, err), lost)
}

// rollback releases the leases taken, in reverse order, with a context
// that ignores ctx's cancellation and ends after
// distlock.DefaultCleanupTimeout, and returns cause joined with every
// release that failed. A release that reports the lease lost (and nothing
// unconfirmed) is not a failure: that key is not held.
func (h *hold) rollback(ctx context.Context, cause error) error {
	h.stopWatching(cause)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), distlock.DefaultCleanupTimeout)
	defer cancel()
	errs := []error{cause}
	for i := len(h.leases) - 1; i >= 0; i-- {
		err := h.leases[i].Release(rctx)
		if err != nil && (!errors.Is(err, distlock.ErrLeaseLost) || errors.Is(err, concurkit.ErrOutcomeUnknown)) {
			errs = append(errs, fmt.Errorf("%s: rollback: release %q: %w", pkg, h.keys[i], err))
		}
	}
	return errors.Join(errs...)
}

// stopWatching ends the hold's context with cause, unless it ended
// already, and deregisters the watches of the leases' contexts.
func (h *hold) stopWatching(cause error) {
	h.end(cause)
	for _, stop := range h.stops {
		stop()
	}
}

func (h *hold) deadline() (deadline time.Time, ok bool) {
	for _, l := range h.leases {
		if d, has := l.Deadline(); has && (!ok || d.Before(deadline)) {
			deadline, ok = d, true
		}
	}
	return deadline, ok
}

func (h *hold) valid() bool {
	for i, l := range h.leases {
		if !l.Valid() {
			// Do not wait for the watch of the lease's context, which
			// runs on another goroutine.
			h.end(leaseCause(h.keys[i], l.Context()))
			return false
		}
	}
	return h.ctx.Err() == nil
}

func (h *hold) extend(ctx context.Context, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: %s: TTL %v < 0", concurkit.ErrInvalidArgument, pkg, ttl)
	}
	var errs []error
	for i, l := range h.leases {
		if err := l.Extend(ctx, ttl); err != nil {
			errs = append(errs, fmt.Errorf("%s: extend %q: %w", pkg, h.keys[i], err))
		}
	}
	return errors.Join(errs...)
}

func (h *hold) release(ctx context.Context) error {
	h.stopWatching(distlock.ErrReleased)
	// Forgotten first: the leases are on their way out, and a Lock after
	// this Release returned must not be refused, whatever the servers
	// answered.
	h.forget.Do(func() { h.rw.count(h.writer, -1) })
	var errs []error
	for i := len(h.leases) - 1; i >= 0; i-- {
		if err := h.leases[i].Release(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: release %q: %w", pkg, h.keys[i], err))
		}
	}
	return errors.Join(errs...)
}

// Read is a held read lock: the lease of one reader slot. Its methods
// are safe for concurrent use. Release it when done, also when its lease
// was lost (a lost lease stays registered with its Locker until
// released, and the RWLock refuses Lock until then: ErrUpgrade).
//
// A reader must not write what the lock protects: other readers are
// inside at the same time, and its token fences nothing.
type Read struct{ h *hold }

// Token returns the fencing token of the reader's slot lease. It is
// strictly greater than the token of every earlier holder of that slot,
// and is not comparable with writers' tokens or other slots' (some
// backends draw every key's tokens from one sequence, where a reader's
// token can be above a later writer's). Never pass it to a fence that
// writers use: it could make storage refuse the next writer. It is for
// logs and for storage of the reader's own.
func (r *Read) Token() fenced.Token { return r.h.leases[0].Token() }

// Context returns a context that ends when the read lock does: when its
// lease is lost or expires (context.Cause matches distlock.ErrLeaseLost,
// or what the lease's cause matches, and names the slot's key) or is
// released (distlock.ErrReleased). Do the reader's work under it.
func (r *Read) Context() context.Context { return r.h.ctx }

// Deadline returns the end of the read lock's safe validity (see
// distlock.Lease.Deadline). ok is false for a lease without time-based
// validity (a ZooKeeper session's lock).
func (r *Read) Deadline() (deadline time.Time, ok bool) { return r.h.deadline() }

// Valid reports whether the read lock is still held: its lease is valid,
// reading the clock at call time (see distlock.Lease.Valid). When it
// returns false, Context is done.
func (r *Read) Valid() bool { return r.h.valid() }

// Extend renews the read lock's lease for ttl from now (0: the TTL it was
// acquired with).
// It returns distlock.ErrLeaseLost, naming the key, when the lease was
// lost, expired or released, the backend's error otherwise, and an error
// matching concurkit.ErrInvalidArgument for a negative ttl.
func (r *Read) Extend(ctx context.Context, ttl time.Duration) error { return r.h.extend(ctx, ttl) }

// Release gives the reader slot back (see distlock.Lease.Release: the
// cleanup ignores ctx's cancellation, but Release returns by ctx's
// deadline). It ends Context with distlock.ErrReleased, and the RWLock
// forgets the read at once, so Lock is no longer refused with
// ErrUpgrade. It returns distlock.ErrLeaseLost for a lease that was lost
// or expired, an error matching concurkit.ErrOutcomeUnknown (and
// ctx.Err() when ctx ended) for a release the server did not confirm,
// each naming the key. Releasing twice returns nil.
func (r *Read) Release(ctx context.Context) error { return r.h.release(ctx) }

// Write is a held write lock: the leases of the gate and of every reader
// slot. Its methods are safe for concurrent use. Release it when done,
// also when a lease of it was lost (a lost lease stays registered with
// its Locker until released, and the RWLock refuses Lock and RLock until
// then: ErrReentrant).
type Write struct{ h *hold }

// Token returns the writer's fencing token: the token of its gate lease,
// strictly greater than every earlier writer's of the lock (readers take
// the gate too, which only skips numbers). Write through package fenced
// with it, so that storage refuses a writer that lost the lock — paused
// past its TTL — once its successor wrote.
func (w *Write) Token() fenced.Token { return w.h.leases[0].Token() }

// Context returns a context that ends when the write lock does: when the
// first of its leases is lost or expires (context.Cause matches
// distlock.ErrLeaseLost, or what that lease's cause matches, and names
// its key) or when it is released (distlock.ErrReleased). Do the
// writer's work under it; it stops work early, fenced writes protect
// storage.
func (w *Write) Context() context.Context { return w.h.ctx }

// Deadline returns the earliest Deadline of the write lock's leases:
// the end of its safe validity. ok is false when no lease has a
// time-based validity (see distlock.Lease.Deadline).
func (w *Write) Deadline() (deadline time.Time, ok bool) { return w.h.deadline() }

// Valid reports whether every lease of the write lock is still valid,
// reading the clock at call time (see distlock.Lease.Valid). When it
// returns false, Context is done, with the cause of a lease that ended.
func (w *Write) Valid() bool { return w.h.valid() }

// Extend renews every lease of the write lock for ttl from now (0: the
// TTL they were acquired with), one after the other, and returns the errors of those that
// failed joined, each naming its key: distlock.ErrLeaseLost for a lease
// lost, expired or released, the backend's error otherwise. Every lease
// is attempted. A negative ttl is an error matching
// concurkit.ErrInvalidArgument, before any call.
func (w *Write) Extend(ctx context.Context, ttl time.Duration) error { return w.h.extend(ctx, ttl) }

// Release gives the write lock up: it ends Context with
// distlock.ErrReleased, the RWLock forgets the hold at once, and it
// releases the slots, then the gate (the reverse of the order Lock took
// them), so that the readers queued at the gate find the slots free. Each release is as
// distlock.Lease.Release (the cleanup ignores ctx's cancellation, but
// returns by ctx's deadline); every lease is released even if one fails,
// and the errors are joined, each naming its key: distlock.ErrLeaseLost
// for a lease that was lost or expired, an error matching
// concurkit.ErrOutcomeUnknown (and ctx.Err() when ctx ended) for a
// release the server did not confirm. Releasing twice returns nil.
func (w *Write) Release(ctx context.Context) error { return w.h.release(ctx) }
