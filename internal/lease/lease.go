package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
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
	// (its deadline still applies). Nil means Extend only checks the
	// lease locally and moves the deadline.
	Extend func(ctx context.Context, ttl time.Duration) error
	// Release deletes the lock on the server only if it is still ours
	// (compare-and-delete) and frees backend resources. It is called at
	// most once, with a context that is never cancelled by the lease
	// itself. Returning an error matching distlock.ErrLeaseLost means the
	// lock was already gone. Nil means nothing to clean up.
	Release func(ctx context.Context) error
}

// Config describes one acquisition.
type Config struct {
	Key   string
	Token fenced.Token
	// TTL is the validity granted by the server, measured from Start.
	// Zero means the lease has no time-based validity (it lives until
	// Lost or Release, e.g. a PostgreSQL session lock); negative is
	// distlock.ErrInvalidOptions.
	TTL time.Duration
	// Start is the local time taken just before the acquiring request was
	// sent: the server's TTL began no earlier than that. Zero means now.
	Start time.Time
	// Drift is subtracted from the validity for clock-rate differences.
	// Zero means DefaultDrift(TTL); negative means none.
	Drift time.Duration
	// Margin is a further safety margin subtracted from the validity, so
	// the holder stops before the server may hand the lock to someone
	// else. Zero means DefaultMargin(TTL); negative means none.
	Margin time.Duration
	// AutoExtend starts a goroutine that calls Extend every TTL/3 until
	// the lease is released or lost. Ignored when TTL is zero.
	AutoExtend bool
	// Backend callbacks.
	Backend Backend
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
	key    string
	token  fenced.Token
	ttl    time.Duration
	drift  time.Duration
	margin time.Duration
	be     Backend

	ctx    context.Context
	cancel context.CancelCauseFunc

	// op serialises the backend calls Extend and Release.
	op sync.Mutex

	mu       sync.Mutex
	st       state
	cause    error
	deadline time.Time
	timer    *time.Timer
	done     chan struct{} // closed when the auto-extend goroutine exits; nil without it
}

var _ distlock.Lease = (*Lease)(nil)

// New returns a held Lease. Its context is derived from
// context.Background (a lease outlives the Acquire call that made it). If
// the validity is already over when New runs, the lease starts lost. It
// returns distlock.ErrInvalidKey for an empty key, fenced.ErrInvalidToken
// for a token ≤ 0 and distlock.ErrInvalidOptions for a negative TTL.
func New(cfg Config) (*Lease, error) {
	switch {
	case cfg.Key == "":
		return nil, fmt.Errorf("%w: empty key", distlock.ErrInvalidKey)
	case !cfg.Token.Valid():
		return nil, fmt.Errorf("%w: %d", fenced.ErrInvalidToken, int64(cfg.Token))
	case cfg.TTL < 0:
		return nil, fmt.Errorf("%w: TTL %v < 0", distlock.ErrInvalidOptions, cfg.TTL)
	}
	l := &Lease{key: cfg.Key, token: cfg.Token, ttl: cfg.TTL, be: cfg.Backend}
	l.drift, l.margin = cfg.Drift, cfg.Margin
	if l.drift == 0 {
		l.drift = DefaultDrift(cfg.TTL)
	}
	if l.margin == 0 {
		l.margin = DefaultMargin(cfg.TTL)
	}
	l.drift, l.margin = max(l.drift, 0), max(l.margin, 0)
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	if cfg.TTL == 0 {
		return l, nil
	}
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	l.mu.Lock()
	l.deadline = l.validUntil(start, cfg.TTL)
	l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
	if cfg.AutoExtend {
		l.done = make(chan struct{})
		go l.autoExtend(l.done)
	}
	l.mu.Unlock()
	return l, nil
}

func (l *Lease) validUntil(start time.Time, ttl time.Duration) time.Time {
	drift, margin := l.drift, l.margin
	if ttl != l.ttl { // an Extend with another ttl: scale the defaults
		drift, margin = DefaultDrift(ttl), DefaultMargin(ttl)
	}
	return start.Add(ttl - drift - margin)
}

// Key returns the locked key.
func (l *Lease) Key() string { return l.key }

// Token returns the fencing token of this acquisition.
func (l *Lease) Token() fenced.Token { return l.token }

// Context returns a context cancelled when the lease is lost, expires or
// is released; context.Cause tells which (ErrExpired, the error given to
// Lost wrapped with distlock.ErrLeaseLost, or ErrReleased).
func (l *Lease) Context() context.Context { return l.ctx }

// Deadline returns the end of the safe validity, or the zero time for a
// lease without time-based validity.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Err returns nil while the lease is held, the loss cause (matching
// distlock.ErrLeaseLost) once it was lost or expired, or ErrReleased.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

func (l *Lease) expire() { l.Lost(ErrExpired) }

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
	if l.st != held {
		l.mu.Unlock()
		return
	}
	l.st, l.cause = lost, err
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.cancel(err)
}

// Extend renews the lease for ttl from now (zero ttl means the TTL given
// at acquisition). It returns distlock.ErrInvalidOptions for a negative
// ttl, distlock.ErrLeaseLost if the lease was already lost, expired or
// released, or if the backend reports it is no longer ours (the lease is
// then marked lost); other backend errors are returned unchanged and leave
// the lease held until its current deadline.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: TTL %v < 0", distlock.ErrInvalidOptions, ttl)
	}
	if ttl == 0 {
		ttl = l.ttl
	}
	l.op.Lock()
	defer l.op.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	start := time.Now()
	if l.be.Extend != nil {
		if err := l.be.Extend(ctx, ttl); err != nil {
			if errors.Is(err, distlock.ErrLeaseLost) {
				l.Lost(err)
				return l.Err()
			}
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st != held {
		return l.cause
	}
	if l.timer != nil && ttl > 0 {
		l.deadline = l.validUntil(start, ttl)
		if !l.timer.Stop() {
			// The timer fired while the backend call was in flight; expire
			// runs (or ran) Lost, which wins: the lease stays lost.
			return ErrExpired
		}
		l.timer.Reset(time.Until(l.deadline))
	}
	return nil
}

func (l *Lease) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.st {
	case lost:
		return l.cause
	case released:
		return fmt.Errorf("%w: already released", distlock.ErrLeaseLost)
	}
	// The timer may not have run yet although the deadline passed.
	if l.timer != nil && !time.Now().Before(l.deadline) {
		l.mu.Unlock()
		l.Lost(ErrExpired)
		l.mu.Lock()
		return l.cause
	}
	return nil
}

// Release gives the lock up: it cancels the context, stops auto-extend,
// and runs the backend's compare-and-delete once, with
// context.WithoutCancel(ctx) so a caller's cancelled context cannot leave
// the lock behind half-released. A second call returns nil. After the
// lease was lost or expired it still runs the backend cleanup and returns
// an error matching distlock.ErrLeaseLost. Backend errors are returned
// wrapped.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.st == released {
		l.mu.Unlock()
		return nil
	}
	wasLost := l.st == lost
	cause := l.cause
	l.st = released
	if !wasLost {
		l.cause = ErrReleased
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	done := l.done
	l.mu.Unlock()
	l.cancel(ErrReleased) // no-op if already cancelled by a loss
	if done != nil {
		<-done // the auto-extend goroutine sees the cancelled context and exits
	}

	l.op.Lock()
	defer l.op.Unlock()
	var berr error
	if l.be.Release != nil {
		berr = l.be.Release(context.WithoutCancel(ctx))
	}
	switch {
	case wasLost && berr != nil && !errors.Is(berr, distlock.ErrLeaseLost):
		return errors.Join(cause, berr)
	case wasLost:
		return cause
	case berr != nil && errors.Is(berr, distlock.ErrLeaseLost):
		return berr
	case berr != nil:
		return fmt.Errorf("lease: release %q: %w", l.key, berr)
	}
	return nil
}

// autoExtend renews the lease every TTL/3; after a failed attempt it
// retries sooner (every TTL/12) until the deadline cancels the context.
func (l *Lease) autoExtend(done chan<- struct{}) {
	defer close(done)
	interval := max(l.ttl/3, time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		err := l.Extend(l.ctx, l.ttl)
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
