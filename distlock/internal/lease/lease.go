package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/observe"
)

// Causes recorded on a lease's context (read them with context.Cause).
// Each one matches distlock.ErrLeaseLost with errors.Is except ErrReleased.
var (
	// ErrExpired is the cause when the safe validity ran out without a
	// successful Extend.
	ErrExpired = fmt.Errorf("%w: validity expired", distlock.ErrLeaseLost)
	// ErrReleased is the cause when the holder called Release.
	ErrReleased = distlock.ErrReleased
)

// Backend is what a lock backend supplies to a Lease.
type Backend struct {
	// Extend renews the lock on the server for ttl from now. It must
	// return an error matching distlock.ErrLeaseLost when the server says
	// the lock is no longer ours (the lease is then marked lost); any other
	// error is treated as an uncertain outcome and leaves the lease alone
	// (its deadline still applies). Its context ends when the caller's
	// does or when the lease is released or lost meanwhile. Nil means
	// Extend only checks the lease locally and moves the deadline.
	Extend func(ctx context.Context, ttl time.Duration) error
	// Release deletes the lock on the server only if it is still ours
	// (compare-and-delete) and frees backend resources. It is called at
	// most once, after any Extend in flight returned, with a context that
	// ignores the cancellation of the caller's but ends at the cleanup
	// timeout: it must return by then. Returning an error matching
	// distlock.ErrLeaseLost means the lock was already gone. Nil means
	// nothing to clean up.
	Release func(ctx context.Context) error
}

// Config describes one acquisition.
type Config struct {
	// Package names the backend in error messages and observe events
	// ("redislock", "etcdlock", ...). Empty means "distlock".
	Package string
	Key     string
	Token   fenced.Token
	// Hooks receive the lease's events (LeaseExtend after every Extend
	// attempt, LeaseLost once on loss). Backends pass
	// observe.FromContext of the Acquire call's context. Nil: none.
	Hooks *observe.Hooks
	// TTL is the validity granted by the server, measured from Start.
	// Zero means the lease has no time-based validity (it lives until
	// Lost or Release, e.g. a ZooKeeper session's lock); negative is
	// concurkit.ErrInvalidArgument. Any positive value is accepted: the
	// deadline arithmetic saturates instead of overflowing.
	TTL time.Duration
	// Start is the local time taken (with time.Now, so that it carries a
	// monotonic reading) just before the acquiring request was sent: the
	// server's TTL began no earlier than that. Zero means now.
	Start time.Time
	// Drift is subtracted from the validity for clock-rate differences.
	// Zero means DefaultDrift(TTL); negative means none.
	Drift time.Duration
	// Margin is a further safety margin subtracted from the validity, so
	// the holder stops before the server may hand the lock to someone
	// else. Zero means DefaultMargin(TTL); negative means none.
	//
	// An Extend with a ttl other than TTL keeps both allowances and scales
	// them up in proportion when ttl is longer (a clock-rate error grows
	// with the interval); it never shrinks them.
	Margin time.Duration
	// CleanupTimeout bounds the backend cleanup run by Release, which
	// ignores the cancellation of the caller's context. Zero means
	// distlock.DefaultCleanupTimeout; negative is
	// concurkit.ErrInvalidArgument.
	CleanupTimeout time.Duration
	// AutoExtend starts a goroutine that calls Extend every TTL/3 until
	// the lease is released or lost. Ignored when TTL is zero.
	AutoExtend bool
	// Backend callbacks.
	Backend Backend
	// Group, if not nil, is the Locker's Group: the lease registers with
	// it until its Release cleanup finished, also after a loss (Close
	// releases what is still registered), and its background goroutines (auto-extension, a
	// Release cleanup its caller stopped waiting for) run in it. New
	// refuses a closed Group's lease (an error matching distlock.ErrClosed).
	Group *Group
}

// DefaultDrift returns the default clock-drift allowance: 1% of ttl plus 2ms
// (the Redlock paper's value).
func DefaultDrift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// DefaultMargin returns the default safety margin: 10% of ttl, at most one
// second.
func DefaultMargin(ttl time.Duration) time.Duration { return min(ttl/10, time.Second) }

type state int

const (
	held state = iota
	lost
	released
)

// Lease implements distlock.Lease on top of a Backend. Its methods are
// safe for concurrent use.
type Lease struct {
	pkg     string
	hooks   *observe.Hooks
	key     string
	token   fenced.Token
	ttl     time.Duration
	drift   time.Duration
	margin  time.Duration
	cleanup time.Duration
	be      Backend
	group   *Group // nil: none

	// ctx is what Context returns: inner, plus the lazy arming of the
	// expiry timer (see leaseCtx). The lease's own waits use inner.
	ctx    *leaseCtx
	inner  context.Context
	cancel context.CancelCauseFunc
	// armed is set once the expiry timer was armed, or need not be (the
	// fast path of leaseCtx's Done and Err).
	armed atomic.Bool

	// op serialises the backend calls Extend and Release. It is a
	// one-slot semaphore rather than a mutex so that waiting for it
	// honours a context.
	op chan struct{}

	mu       sync.Mutex
	st       state
	cause    error
	timed    bool          // the lease has time-based validity (TTL > 0)
	deadline time.Time     // end of the safe validity when timed
	timer    *time.Timer   // nil until armed (see leaseCtx)
	paused   bool          // tests: PauseTimer, the timer must not run
	done     chan struct{} // closed when the auto-extend goroutine exits; nil without it
	// Release state: cleaned is closed when the backend cleanup ended
	// (nil before the first Release); outcome is its result, reported
	// by the first Release call that sees it.
	cleaned  chan struct{}
	lostErr  error // the loss cause if the lease was lost before Release
	outcome  error
	reported bool
	// lossToReport is the loss cause not yet reported to hooks.LeaseLost
	// (set only when hooks is not nil): the report is made by the
	// goroutine that caused the loss, after it released mu.
	lossToReport error
}

var _ distlock.Lease = (*Lease)(nil)

// New returns a held Lease. Its context is derived from
// context.Background (a lease outlives the Acquire call that made it). If
// the validity is already over when New runs (a Start too far in the past,
// or drift and margin that leave nothing of the TTL), the lease starts
// lost: its context is already done with cause ErrExpired. It returns
// distlock.ErrInvalidKey for an empty key, fenced.ErrInvalidToken for a
// token ≤ 0 and an error matching concurkit.ErrInvalidArgument for a
// negative TTL or CleanupTimeout.
func New(cfg Config) (*Lease, error) {
	if cfg.Package == "" {
		cfg.Package = "distlock"
	}
	switch {
	case cfg.Key == "":
		return nil, fmt.Errorf("%w: empty key", distlock.ErrInvalidKey)
	case !cfg.Token.Valid():
		return nil, fmt.Errorf("%w: %d", fenced.ErrInvalidToken, int64(cfg.Token))
	case cfg.TTL < 0:
		return nil, fmt.Errorf("%w: %s: TTL %v < 0", concurkit.ErrInvalidArgument, cfg.Package, cfg.TTL)
	case cfg.CleanupTimeout < 0:
		return nil, fmt.Errorf("%w: %s: CleanupTimeout %v < 0", concurkit.ErrInvalidArgument, cfg.Package, cfg.CleanupTimeout)
	}
	l := &Lease{pkg: cfg.Package, hooks: cfg.Hooks, key: cfg.Key, token: cfg.Token, ttl: cfg.TTL, be: cfg.Backend, group: cfg.Group, op: make(chan struct{}, 1)}
	if l.group != nil && !l.group.add(l) {
		return nil, ErrClosed(cfg.Package)
	}
	l.drift, l.margin, l.cleanup = cfg.Drift, cfg.Margin, cfg.CleanupTimeout
	if l.drift == 0 {
		l.drift = DefaultDrift(cfg.TTL)
	}
	if l.margin == 0 {
		l.margin = DefaultMargin(cfg.TTL)
	}
	if l.cleanup == 0 {
		l.cleanup = distlock.DefaultCleanupTimeout
	}
	l.drift, l.margin = max(l.drift, 0), max(l.margin, 0)
	l.inner, l.cancel = context.WithCancelCause(context.Background())
	l.ctx = &leaseCtx{Context: l.inner, l: l}
	if cfg.TTL == 0 {
		l.armed.Store(true) // no time-based validity: nothing to arm
		return l, nil
	}
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	l.startTimed(cfg, start)
	l.reportLost()
	return l, nil
}

// startTimed sets the deadline of a lease with a TTL and starts its timer
// and auto-extension, or marks it lost if its validity is already over.
func (l *Lease) startTimed(cfg Config, start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timed = true
	validity, _ := l.validity(cfg.TTL)
	l.deadline = start.Add(validity)
	// Checked here, not left to the timer: a timer due in the past fires
	// only after New returned, and the caller would get a live context
	// for a lease that is already over.
	if !time.Now().Before(l.deadline) {
		l.loseLocked(ErrExpired)
		return
	}
	// Hooks must hear of an expiry nobody looks for, and the auto-extender
	// waits on the context: both need the timer now. Otherwise it is armed
	// when someone first looks at the context (leaseCtx).
	if l.hooks != nil || cfg.AutoExtend {
		l.armLocked()
	}
	if cfg.AutoExtend {
		l.done = make(chan struct{})
		l.goTracked(func() { l.autoExtend(l.done) })
	}
}

// validity returns how long a lease renewed for ttl stays safely valid:
// ttl minus the drift allowance and the margin. For a ttl other than the
// acquisition TTL both allowances are kept, scaled up in proportion when
// ttl is longer. ok is false when nothing is left (validity 0).
func (l *Lease) validity(ttl time.Duration) (d time.Duration, ok bool) {
	drift, margin := l.drift, l.margin
	if ttl > l.ttl && l.ttl > 0 {
		drift, margin = scale(drift, ttl, l.ttl), scale(margin, ttl, l.ttl)
	}
	// Written so that no intermediate value overflows.
	if drift >= ttl || margin >= ttl-drift {
		return 0, false
	}
	return ttl - drift - margin, true
}

// scale returns d·num/den (all ≥ 0, den > 0), saturating at the largest
// Duration instead of overflowing.
func scale(d, num, den time.Duration) time.Duration {
	hi, lo := bits.Mul64(uint64(d), uint64(num))
	if hi >= uint64(den) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(den))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// Key returns the locked key.
func (l *Lease) Key() string { return l.key }

// Token returns the fencing token of this acquisition.
func (l *Lease) Token() fenced.Token { return l.token }

// Context returns a context cancelled when the lease is lost, expires or
// is released; context.Cause tells which (ErrExpired, the error given to
// Lost wrapped with distlock.ErrLeaseLost, or ErrReleased).
func (l *Lease) Context() context.Context { return l.ctx }

// Deadline returns the end of the safe validity (see
// distlock.Lease.Deadline); ok is false for a lease without time-based
// validity (TTL zero).
func (l *Lease) Deadline() (deadline time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline, l.timed
}

// Valid reports whether the lease is held and, for a lease with a TTL,
// the monotonic clock is before its deadline now. It does not rely on the
// expiry timer, which fires late after a process pause: when it finds the
// deadline passed it marks the lease lost with ErrExpired before it
// returns false.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	ok := l.checkLocked() == nil
	l.mu.Unlock()
	l.reportLost()
	return ok
}

// Err returns nil while the lease is held, the loss cause (matching
// distlock.ErrLeaseLost) once it was lost or expired, or ErrReleased. Like
// Valid, it checks the deadline against the clock.
func (l *Lease) Err() error {
	l.mu.Lock()
	if l.st == held {
		_ = l.checkLocked()
	}
	err := l.cause
	l.mu.Unlock()
	l.reportLost()
	return err
}

// checkLocked returns nil if the lease is held and within its deadline,
// else an error matching distlock.ErrLeaseLost; a passed deadline marks
// the lease lost. l.mu is held.
func (l *Lease) checkLocked() error {
	switch l.st {
	case lost:
		return l.cause
	case released:
		return fmt.Errorf("%w: %s: already released", distlock.ErrLeaseLost, l.pkg)
	}
	if l.timed && !time.Now().Before(l.deadline) {
		l.loseLocked(ErrExpired)
		return l.cause
	}
	return nil
}

// loseLocked marks a held lease lost and cancels its context. Cancelling
// under l.mu keeps the state and the context in step (Valid false ⇒
// context done); it is safe because cancellation runs no callback that
// could come back to l.mu synchronously (context.AfterFunc functions run
// in their own goroutines). l.mu is held.
func (l *Lease) loseLocked(err error) {
	if l.st != held {
		return
	}
	l.st, l.cause = lost, err
	if l.hooks != nil {
		l.lossToReport = err
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel(err)
}

// reportLost reports a loss not reported yet to hooks.LeaseLost, on the
// goroutine that caused it, after it released mu (a callback may call the
// lease's methods). Every method that can mark the lease lost calls it
// after unlocking; without hooks it costs one nil check.
func (l *Lease) reportLost() {
	if l.hooks == nil {
		return
	}
	l.mu.Lock()
	err := l.lossToReport
	l.lossToReport = nil
	l.mu.Unlock()
	if err != nil {
		l.hooks.OnLeaseLost(l.inner, observe.LeaseEvent{Package: l.pkg, Key: l.key, Token: int64(l.token), Err: err})
	}
}

// expire runs from the timer. A timer can fire for a deadline that an
// Extend has moved meanwhile; it then rearms itself instead.
func (l *Lease) expire() {
	l.mu.Lock()
	if l.st == held {
		if d := time.Until(l.deadline); d > 0 {
			l.timer.Reset(d)
		} else {
			l.loseLocked(ErrExpired)
		}
	}
	l.mu.Unlock()
	l.reportLost()
}

// leaseCtx is a lease's context: its cancel-cause context, whose Done
// and Err first arm the expiry timer. A lease whose context nobody looks
// at (take the lock, write with its token, release) then costs no timer:
// creating one that is due before the runtime's next poll deadline breaks
// the network poller out of its wait (a syscall and a thread wake-up per
// lease), a measurable share of an uncontended acquisition. Whoever can
// observe the cancellation arms it first, so the context still ends at the
// deadline for everyone (a derived context or context.AfterFunc calls
// Done). Value is the inner context's, so context.Cause works.
type leaseCtx struct {
	context.Context
	l *Lease
}

func (c *leaseCtx) Done() <-chan struct{} {
	c.l.arm()
	return c.Context.Done()
}

func (c *leaseCtx) Err() error {
	c.l.arm()
	return c.Context.Err()
}

// arm arms the expiry timer unless it is armed already or not needed.
func (l *Lease) arm() {
	if l.armed.Load() {
		return
	}
	l.mu.Lock()
	l.armLocked()
	l.mu.Unlock()
	l.reportLost()
}

// armLocked starts the expiry timer of a held lease with a TTL, or marks
// it lost if the deadline passed already. l.mu is held.
func (l *Lease) armLocked() {
	if l.armed.Load() {
		return
	}
	l.armed.Store(true)
	if l.st != held || !l.timed || l.paused {
		return
	}
	d := time.Until(l.deadline)
	if d <= 0 {
		l.loseLocked(ErrExpired)
		return
	}
	l.timer = time.AfterFunc(d, l.expire)
}

// Lost marks the lease lost with cause err (wrapped so that it matches
// distlock.ErrLeaseLost) and cancels its context. Backends call it from
// their watchers (session expiry, dead connection). It is a no-op once the
// lease is lost or released.
func (l *Lease) Lost(err error) {
	if err == nil {
		err = distlock.ErrLeaseLost
	}
	if !errors.Is(err, distlock.ErrLeaseLost) {
		err = fmt.Errorf("%w: %w", distlock.ErrLeaseLost, err)
	}
	l.mu.Lock()
	l.loseLocked(err)
	l.mu.Unlock()
	l.reportLost()
}

// Extend renews the lease for ttl from now (zero ttl means the TTL given
// at acquisition). It returns an error matching concurkit.ErrInvalidArgument
// for a negative ttl or one that leaves no validity after drift and margin
// (without calling the backend), distlock.ErrLeaseLost if the lease was already
// lost, expired or released, if the backend reports it is no longer ours,
// or if the deadline passed before the backend answered (the lease is then
// marked lost); ctx.Err() if ctx ends while it waits for another Extend in
// flight; other backend errors are returned unchanged and leave the lease
// held until its current deadline. A lease without time-based validity
// (TTL zero) only asks the backend; it keeps having no deadline.
//
// Every call not rejected as bad input is reported to the hooks
// (LeaseExtend, with the error), and a loss it causes to LeaseLost.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: %s: TTL %v < 0", concurkit.ErrInvalidArgument, l.pkg, ttl)
	}
	if ttl == 0 {
		ttl = l.ttl
	}
	validity, ok := l.validity(ttl)
	if l.ttl > 0 && !ok {
		return fmt.Errorf("%w: %s: TTL %v leaves no validity after drift and margin", concurkit.ErrInvalidArgument, l.pkg, ttl)
	}
	err := l.extend(ctx, ttl, validity)
	if l.hooks != nil {
		l.hooks.OnLeaseExtend(l.inner, observe.LeaseEvent{Package: l.pkg, Key: l.key, Token: int64(l.token), Err: err})
		l.reportLost()
	}
	return err
}

// extend is Extend after the argument checks.
func (l *Lease) extend(ctx context.Context, ttl, validity time.Duration) error {
	select {
	case l.op <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.op }()
	l.mu.Lock()
	err := l.checkLocked()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	start := time.Now()
	if l.be.Extend != nil {
		// Release or a loss makes the renewal moot: stop waiting for it.
		bctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(l.inner, func() { cancel(context.Cause(l.inner)) })
		err := l.be.Extend(bctx, ttl)
		stop()
		cancel(nil)
		if err != nil {
			l.mu.Lock()
			defer l.mu.Unlock()
			if errors.Is(err, distlock.ErrLeaseLost) {
				l.loseLocked(err) // no-op if released or lost meanwhile
				return l.checkLocked()
			}
			if cerr := l.checkLocked(); cerr != nil {
				return cerr // released, lost or expired meanwhile: that matters more
			}
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// The old deadline must not have passed while the backend call was in
	// flight (a pause, a slow server): validity never comes back once over,
	// whether or not the timer or a Valid call noticed in time.
	if err := l.checkLocked(); err != nil {
		return err
	}
	if !l.timed {
		return nil
	}
	l.deadline = start.Add(validity)
	if !time.Now().Before(l.deadline) {
		l.loseLocked(ErrExpired)
		return l.cause
	}
	if l.timer != nil {
		l.timer.Reset(time.Until(l.deadline))
	}
	return nil
}

// Release gives the lock up (see distlock.Lease.Release for the
// contract). The first call marks the lease released, cancels its context
// and starts the cleanup in a goroutine: it waits for the auto-extend
// goroutine and any Extend in flight (both cancelled by the lease's
// context), then runs Backend.Release with context.WithoutCancel(ctx)
// bounded by the cleanup timeout. Every call then waits for the cleanup
// or for its own ctx, whichever ends first. The goroutine ends by the
// cleanup timeout provided the backend honours its context; a test waits
// for it with a second Release(context.Background()).
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	first := l.cleaned == nil
	if first {
		if l.st == lost {
			l.lostErr = l.cause
		} else {
			l.cause = ErrReleased
		}
		l.st = released
		if l.timer != nil {
			l.timer.Stop()
		}
		l.cleaned = make(chan struct{})
		l.cancel(ErrReleased) // no-op if already cancelled by a loss
	}
	cleaned, lostErr := l.cleaned, l.lostErr
	l.mu.Unlock()
	if first {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cleanup)
		if ctx.Done() == nil {
			// The caller waits as long as the cleanup takes (it cannot be
			// cancelled): run it here, without a goroutine, whose fresh
			// stack would grow through the client's deep call chain.
			l.runCleanup(cctx, cancel)
		} else {
			l.goTracked(func() { l.runCleanup(cctx, cancel) })
		}
	}

	select {
	case <-cleaned:
	case <-ctx.Done():
		select {
		case <-cleaned: // both ready: the outcome is known, report it
		default:
			err := &unconfirmed{msg: fmt.Sprintf("%s: release of %q unconfirmed (cleanup continues in the background for up to %v; the server frees the lock at its TTL or session end at the latest)",
				l.pkg, l.key, l.cleanup), err: ctx.Err()}
			if lostErr != nil {
				return errors.Join(lostErr, err)
			}
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reported {
		return nil
	}
	l.reported = true
	return l.outcome
}

// runCleanup is the body of the cleanup goroutine started by Release.
func (l *Lease) runCleanup(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	var berr error
	if l.done != nil {
		select {
		case <-l.done: // the auto-extend goroutine saw the cancelled context
		case <-ctx.Done():
			berr = fmt.Errorf("waiting for auto-extend to stop: %w", ctx.Err())
		}
	}
	if berr == nil {
		select {
		case l.op <- struct{}{}: // an Extend in flight returned
			if l.be.Release != nil {
				berr = l.be.Release(ctx)
			}
			<-l.op
		case <-ctx.Done():
			berr = fmt.Errorf("waiting for an Extend in flight: %w", ctx.Err())
		}
	}
	if l.group != nil {
		l.group.remove(l)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A cleanup that failed other than by finding the lock gone leaves the
	// release unconfirmed: the lock may still be there until its TTL.
	switch lostErr := l.lostErr; {
	case lostErr != nil && berr != nil && !errors.Is(berr, distlock.ErrLeaseLost):
		l.outcome = errors.Join(lostErr, l.unconfirmed(berr))
	case lostErr != nil:
		l.outcome = lostErr
	case berr != nil && errors.Is(berr, distlock.ErrLeaseLost):
		l.outcome = berr
	case berr != nil:
		l.outcome = l.unconfirmed(berr)
	}
	close(l.cleaned)
}

// autoExtend renews the lease every TTL/3; after a failed attempt it
// retries sooner (every TTL/12) until the deadline cancels the context.
// Each attempt is given up after TTL/3: against a server that does not
// answer (frozen, partitioned) the failure is reported to the hooks and
// retried while the lease is still valid, instead of one attempt hanging
// until the lease expires.
func (l *Lease) autoExtend(done chan<- struct{}) {
	defer close(done)
	interval := max(l.ttl/3, time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-l.inner.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(l.inner, interval)
		err := l.Extend(ctx, l.ttl)
		cancel()
		switch {
		case err == nil:
			t.Reset(interval)
		case errors.Is(err, distlock.ErrLeaseLost):
			return
		default:
			t.Reset(max(interval/4, time.Millisecond))
		}
	}
}

// goTracked runs f in a goroutine of the lease's Group, or a plain one.
func (l *Lease) goTracked(f func()) {
	if l.group != nil {
		l.group.Go(f)
		return
	}
	go f()
}

// unconfirmed wraps the error of a failed cleanup.
func (l *Lease) unconfirmed(err error) error {
	if errors.Is(err, concurkit.ErrOutcomeUnknown) {
		return err // says so already (e.g. redlock.ErrNoQuorum)
	}
	return &unconfirmed{msg: fmt.Sprintf("%s: release of %q unconfirmed", l.pkg, l.key), err: err}
}

// unconfirmed is the error of a release whose outcome is unknown: the
// caller stopped waiting (err is its context's error) or the cleanup
// failed (err is why). It matches concurkit.ErrOutcomeUnknown and err.
type unconfirmed struct {
	msg string
	err error
}

func (e *unconfirmed) Error() string        { return e.msg + ": " + e.err.Error() }
func (e *unconfirmed) Unwrap() error        { return e.err }
func (e *unconfirmed) Is(target error) bool { return target == concurkit.ErrOutcomeUnknown }

// ErrorType names the error for observe.ErrorType.
func (e *unconfirmed) ErrorType() string { return "outcome_unknown" }
