package election

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
)

var (
	// ErrLeadershipLost is the cause of a Term's Context when its lease
	// ended other than by Resign (expired, session ended, lost on the
	// server, the Locker closed). The cause also matches the lease's own
	// cause (distlock.ErrLeaseLost, distlock.ErrClosed).
	ErrLeadershipLost = errors.New("election: leadership lost")
	// ErrResigned is the cause of a Term's Context after Resign.
	ErrResigned = errors.New("election: resigned")
	// ErrNoBoard is returned by the calls that need Config.Board when the
	// Election has none.
	ErrNoBoard = errors.New("election: no board")
	// ErrNoLeader is returned by Board.Leader and Election.Leader when no
	// leader of the election ever proclaimed.
	ErrNoLeader = errors.New("election: no leader")
)

// Defaults of Config's zero fields.
const (
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultRetryMin      = 100 * time.Millisecond
	DefaultRetryMax      = 5 * time.Second
	DefaultResignTimeout = distlock.DefaultCleanupTimeout
)

// Config tunes an Election. A nil *Config, and every zero field, means
// the documented default.
type Config struct {
	// TTL of the leader's lease, renewed while it leads. Default
	// distlock.DefaultTTL. It bounds how long an election stays without
	// a leader after one dies without resigning.
	TTL time.Duration
	// Board keeps the leaders' proclamations. Nil: the Election has no
	// board; Proclaim, Observe and Leader return ErrNoBoard and Campaign
	// proclaims nothing.
	Board Board
	// PollInterval is how often Observe reads the board. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// RetryMin and RetryMax bound Lead's backoff before campaigning again
	// after a lost term or a failed Campaign: it doubles from RetryMin to
	// RetryMax with full jitter, and starts over after a term is won.
	// Defaults DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration
}

// Board is where an election's leaders proclaim themselves: one record
// per election, written with the leader's term as a fencing token.
// electionpg.Board implements it on PostgreSQL; implement it on your own
// storage with package fenced.
type Board interface {
	// Proclaim records term and value as the election's leader. It must
	// refuse, with an error matching fenced.ErrStaleToken and without
	// storing anything, a term lower than one the board has accepted for
	// the election; an equal term (the leader proclaiming again) passes.
	Proclaim(ctx context.Context, election string, term fenced.Token, value string) error
	// Vacate marks term ended (the leader resigned), keeping its value.
	// It refuses a stale term as Proclaim does.
	Vacate(ctx context.Context, election string, term fenced.Token) error
	// Leader returns the latest proclamation, or ErrNoLeader.
	Leader(ctx context.Context, election string) (Leader, error)
}

// Leader is a board's record of an election's leader.
type Leader struct {
	// Term is the leader's term (its lease's fencing token).
	Term fenced.Token
	// Value is what the leader proclaimed.
	Value string
	// Vacated says the leader resigned: the election has no leader until
	// the next one proclaims.
	Vacated bool
}

// Election is one named election on a Locker. It is safe for concurrent
// use; every candidate (usually one per process) makes its own, on the
// same backend and name.
type Election struct {
	locker distlock.Locker
	name   string
	cfg    Config
}

// New returns the Election name on locker. The name is the lock key and
// the board's record key. It returns an error matching
// concurkit.ErrInvalidArgument for a nil locker (also a typed nil), an
// empty name, a negative duration, or RetryMin above RetryMax; cfg is
// copied.
func New(locker distlock.Locker, name string, cfg *Config) (*Election, error) {
	if handle.IsNil(locker) {
		return nil, fmt.Errorf("%w: election: nil locker", concurkit.ErrInvalidArgument)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: election: empty name", concurkit.ErrInvalidArgument)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TTL < 0 || c.PollInterval < 0 || c.RetryMin < 0 || c.RetryMax < 0 {
		return nil, fmt.Errorf("%w: election: negative duration in Config", concurkit.ErrInvalidArgument)
	}
	if handle.IsNil(c.Board) {
		c.Board = nil
	}
	if c.TTL == 0 {
		c.TTL = distlock.DefaultTTL
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
	if c.RetryMin > c.RetryMax {
		return nil, fmt.Errorf("%w: election: RetryMin %v above RetryMax %v", concurkit.ErrInvalidArgument, c.RetryMin, c.RetryMax)
	}
	return &Election{locker: locker, name: name, cfg: c}, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Campaign blocks until the candidate is elected or ctx ends, and returns
// its Term. With a Board it then proclaims value; if that fails, it
// resigns and returns the error (with the board, a leader nobody can see
// is no leader). The errors are the Locker's (matching ctx.Err() when ctx
// ended the wait) and the Board's.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	lease, err := e.locker.Acquire(ctx, e.name, &distlock.Options{TTL: e.cfg.TTL, AutoExtend: true})
	if err != nil {
		return nil, err
	}
	if lease == nil {
		return nil, fmt.Errorf("election: %T.Acquire returned neither a lease nor an error", e.locker)
	}
	t := newTerm(e, lease)
	if e.cfg.Board != nil {
		if err := e.cfg.Board.Proclaim(ctx, e.name, t.Number(), value); err != nil {
			return nil, errors.Join(fmt.Errorf("election: proclaim term %d: %w", t.Number(), err), t.resign(ctx, false))
		}
	}
	return t, nil
}

// Leader reads the board's latest proclamation: ErrNoBoard without one,
// ErrNoLeader if nobody proclaimed yet.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if e.cfg.Board == nil {
		return Leader{}, ErrNoBoard
	}
	return e.cfg.Board.Leader(ctx, e.name)
}

// Observe reads the board every PollInterval and sends each leader it
// sees for the first time (a new term, a new value, a resignation),
// starting with the current one, on the returned channel, which it closes
// when ctx ends. A failed read is retried at the next poll (Observe is a
// view, and the board's errors are the caller's to see through Leader).
// Observe returns ErrNoBoard without a board. The channel is unbuffered: a
// slow reader skips the leaders it was too slow for, never reads a stale
// one after a newer.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if e.cfg.Board == nil {
		return nil, ErrNoBoard
	}
	ch := make(chan Leader)
	go func() {
		defer close(ch)
		var last Leader
		seen := false
		tick := time.NewTicker(e.cfg.PollInterval)
		defer tick.Stop()
		for {
			l, err := e.cfg.Board.Leader(ctx, e.name)
			if err == nil && (!seen || l != last) && l.Term >= last.Term {
				select {
				case ch <- l:
					last, seen = l, true
				case <-ctx.Done():
					return
				case <-tick.C: // a newer leader may be on the board: read again
					continue
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return ch, nil
}

// Lead runs fn while the candidate leads, and campaigns again whenever
// leadership is lost: the recipe for a job that one process of many must
// run. It campaigns with value; once elected it calls fn with a context that
// ends with ctx or with the term (then with the term's cause,
// ErrLeadershipLost) and the term. When fn returns while the term still holds, Lead
// resigns and returns fn's error (nil included). When the term was lost
// before fn returned, fn's error is dropped (a deposed leader's failure is
// expected) and Lead campaigns again after a jittered backoff
// (RetryMin–RetryMax), as it does after a Campaign that failed for any
// reason other than ctx. It returns ctx's error joined with the last
// failure when ctx ends; a nil fn is an error matching
// concurkit.ErrInvalidArgument.
func (e *Election) Lead(ctx context.Context, value string, fn func(ctx context.Context, t *Term) error) error {
	if fn == nil {
		return fmt.Errorf("%w: election: nil fn", concurkit.ErrInvalidArgument)
	}
	backoff := e.cfg.RetryMin
	for {
		t, err := e.Campaign(ctx, value)
		if err == nil {
			backoff = e.cfg.RetryMin
			fctx, cancel := context.WithCancelCause(ctx)
			stop := context.AfterFunc(t.Context(), func() { cancel(context.Cause(t.Context())) })
			ferr := fn(fctx, t)
			stop()
			cancel(nil)
			lost := t.lost()
			rerr := t.Resign(context.WithoutCancel(ctx))
			if !lost {
				return errors.Join(ferr, rerr)
			}
		}
		if ctx.Err() != nil {
			return errors.Join(context.Cause(ctx), err)
		}
		d := time.Duration(rand.Int64N(int64(backoff) + 1))
		backoff = min(2*backoff, e.cfg.RetryMax)
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return errors.Join(context.Cause(ctx), err)
		case <-timer.C:
		}
	}
}

// Term is one leader's tenure: from Campaign's return until Resign, or
// until its lease is lost.
type Term struct {
	e      *Election
	lease  distlock.Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool

	mu       sync.Mutex
	resigned bool
	rerr     error
}

func newTerm(e *Election, lease distlock.Lease) *Term {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &Term{e: e, lease: lease, ctx: ctx, cancel: cancel}
	lctx := lease.Context()
	t.stop = context.AfterFunc(lctx, func() {
		cause := context.Cause(lctx)
		if errors.Is(cause, distlock.ErrReleased) {
			cause = ErrResigned
		} else {
			cause = errors.Join(ErrLeadershipLost, cause)
		}
		cancel(cause)
	})
	return t
}

// Number returns the term: the lease's fencing token, strictly greater
// than every earlier leader's of the election. Write through package
// fenced with it.
func (t *Term) Number() fenced.Token { return t.lease.Token() }

// Lease returns the lease behind the term, for a backend-specific check
// (its Key is the election's name).
func (t *Term) Lease() distlock.Lease { return t.lease }

// Context returns a context that ends when the term does: its cause is
// ErrResigned after Resign, else ErrLeadershipLost joined with the
// lease's cause. It ends before the backend may elect a successor (the
// lease's contract); stop leading when it does.
func (t *Term) Context() context.Context { return t.ctx }

// Valid reports whether the term still holds, reading the clock (see
// distlock.Lease.Valid).
func (t *Term) Valid() bool { return t.lease.Valid() && t.ctx.Err() == nil }

// lost reports whether the term ended other than by Resign.
func (t *Term) lost() bool {
	if t.lease.Valid() {
		return false
	}
	return !errors.Is(context.Cause(t.lease.Context()), distlock.ErrReleased)
}

// Proclaim writes value to the board under the term. A deposed leader's
// proclamation is refused by the board (fenced.ErrStaleToken); ErrNoBoard
// without a board.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	if t.e.cfg.Board == nil {
		return ErrNoBoard
	}
	return t.e.cfg.Board.Proclaim(ctx, t.e.name, t.Number(), value)
}

// Resign ends the term: it marks it vacated on the board (if any, and if
// the term still holds) and releases the lease, so that another candidate
// is elected at once. The Context ends with ErrResigned. Its cleanup
// outlives ctx's cancellation, bounded by DefaultResignTimeout, like
// distlock's Release; it returns the release's error (distlock.ErrLeaseLost
// when the term was already lost). A second call returns the first's
// result.
func (t *Term) Resign(ctx context.Context) error { return t.resign(ctx, true) }

func (t *Term) resign(ctx context.Context, vacate bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.resigned {
		return t.rerr
	}
	t.resigned = true
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultResignTimeout)
	defer cancel()
	var verr error
	if vacate && t.e.cfg.Board != nil && t.lease.Valid() {
		// Before the release: once released, a successor's proclamation
		// may land, and ours would be refused (harmless, but noise).
		verr = t.e.cfg.Board.Vacate(cctx, t.e.name, t.Number())
		if errors.Is(verr, fenced.ErrStaleToken) {
			verr = nil // a successor already proclaimed: nothing to vacate
		}
	}
	rerr := t.lease.Release(cctx)
	t.stop()
	if t.ctx.Err() == nil {
		if errors.Is(rerr, distlock.ErrLeaseLost) {
			t.cancel(errors.Join(ErrLeadershipLost, rerr))
		} else {
			t.cancel(ErrResigned)
		}
	}
	t.rerr = errors.Join(verr, rerr)
	return t.rerr
}
