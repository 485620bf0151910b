package semaphore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/retry"
)

// pkg names the package in errors and observe events.
const pkg = "semaphore"

// Default backoff of a waiting Acquire between two rounds over the permits.
const (
	DefaultPollMin = 20 * time.Millisecond
	DefaultPollMax = 500 * time.Millisecond
)

// Config tunes a Semaphore. A nil *Config, and every zero field, means the
// documented default; New copies what it needs and never modifies it.
type Config struct {
	// TTL is the lease validity of a permit (distlock.Options.TTL: each
	// backend documents what it means, e.g. a key expiry or a session
	// timeout). A holder that dies frees its permit within about one TTL.
	// Zero means distlock.DefaultTTL.
	TTL time.Duration
	// AutoExtend is passed to distlock.Options: the lease of a permit is
	// extended every TTL/3 until it is released or lost. Off by default.
	AutoExtend bool
	// PollMin and PollMax bound the backoff of a waiting Acquire between
	// two rounds over the permits: after the n-th round that found every
	// permit held it waits a random delay in [0, min(PollMax,
	// PollMin·2^(n-1))] (full jitter, so that waiters do not poll in
	// step). Zero means DefaultPollMin (20ms) and DefaultPollMax (500ms).
	PollMin, PollMax time.Duration
}

// Semaphore is a counting semaphore of a fixed number of permits, each a
// lock of a distlock.Locker (see the package documentation). Make one with
// New; its methods are safe for concurrent use. It holds no state besides
// its configuration: the permits live on the lock service, and Semaphores
// with the same name, permits and lock service — in one process or many —
// share them.
type Semaphore struct {
	locker           distlock.Locker
	name             string
	keys             []string // the permits' lock keys, by index
	opts             distlock.Options
	pollMin, pollMax time.Duration
}

// New returns a Semaphore of permits permits named name on the locks of l:
// permit i is the lock on key name + "/permit/" + i. cfg may be nil (the
// defaults). It does no I/O.
//
// It returns an error matching concurkit.ErrInvalidArgument for a nil l
// (also a typed nil, such as a nil *pglock.Locker), an empty name,
// permits < 1, a negative TTL, PollMin or PollMax, or PollMin above
// PollMax (after defaults). Keys the backend cannot store (too long, not
// UTF-8) are reported by the first acquisition, as distlock.ErrInvalidKey.
func New(l distlock.Locker, name string, permits int, cfg *Config) (*Semaphore, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case handle.IsNil(l):
		return nil, fmt.Errorf("%w: %s: nil Locker", concurkit.ErrInvalidArgument, pkg)
	case name == "":
		return nil, fmt.Errorf("%w: %s: empty name", concurkit.ErrInvalidArgument, pkg)
	case permits < 1:
		return nil, fmt.Errorf("%w: %s: %d permits, want at least 1", concurkit.ErrInvalidArgument, pkg, permits)
	case c.TTL < 0:
		return nil, fmt.Errorf("%w: %s: TTL %v < 0", concurkit.ErrInvalidArgument, pkg, c.TTL)
	case c.PollMin < 0 || c.PollMax < 0:
		return nil, fmt.Errorf("%w: %s: negative PollMin %v or PollMax %v", concurkit.ErrInvalidArgument, pkg, c.PollMin, c.PollMax)
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
	keys := make([]string, permits)
	for i := range keys {
		keys[i] = name + "/permit/" + strconv.Itoa(i)
	}
	return &Semaphore{
		locker:  l,
		name:    name,
		keys:    keys,
		opts:    distlock.Options{TTL: c.TTL, AutoExtend: c.AutoExtend},
		pollMin: c.PollMin,
		pollMax: c.PollMax,
	}, nil
}

// Permits returns the number of permits (0 for a nil Semaphore).
func (s *Semaphore) Permits() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// check rejects a nil Semaphore or one not made by New, before any I/O.
func (s *Semaphore) check() error {
	if s == nil || len(s.keys) == 0 {
		return fmt.Errorf("%w: %s: nil or zero Semaphore (use New)", concurkit.ErrInvalidArgument, pkg)
	}
	return nil
}

// TryAcquire makes one round over the permits, starting at a random one,
// and returns the lease of the first permit it gets (its Key tells which;
// Release gives it back). It does not wait.
//
// It returns an error matching distlock.ErrNotAcquired when every permit
// was held, or when some were held and the requests for the others failed
// (their errors are joined to it, each naming its permit key); when every
// request failed, the joined errors, which do not match ErrNotAcquired;
// errors.Join(distlock.ErrNotAcquired, ctx.Err()) when ctx ended; and the
// Locker's error matching distlock.ErrClosed (and ErrNotAcquired) at once
// when the Locker was closed. A nil Semaphore is bad input
// (concurkit.ErrInvalidArgument).
func (s *Semaphore) TryAcquire(ctx context.Context) (distlock.Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	l, busy, failed, err := s.round(ctx)
	switch {
	case l != nil:
		return l, nil
	case err != nil:
		return nil, err
	}
	return nil, s.roundErr(busy, failed)
}

// Acquire blocks until it holds a permit or ctx ends: it makes rounds of
// TryAcquire, waiting between them a random delay bounded by
// Config.PollMin and PollMax. Waiters are not served in arrival order (see
// the package documentation).
//
// It returns errors.Join(distlock.ErrNotAcquired, ctx.Err()) when ctx ends
// first, joined also with the failures of the last round, if any (a
// permit whose server did not answer); the error of a round in which no
// permit was merely held (every request failed: waiting would not help),
// which does not match ErrNotAcquired; the Locker's error matching
// distlock.ErrClosed when the Locker was closed (noticed at the next
// round); and concurkit.ErrInvalidArgument for a nil Semaphore.
//
// An Acquire whose first round found no free permit reports its wait to
// the hooks of ctx (observe.Hooks.LockWait, with Package "semaphore" and
// Key the semaphore's name); the lease reports its extensions and its loss
// as every lease of its backend does, with the permit's key.
func (s *Semaphore) Acquire(ctx context.Context) (_ distlock.Lease, err error) {
	if err := s.check(); err != nil {
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
			lease.ReportWait(ctx, pkg, s.name, start, n, err)
		}
	}()
	backoff := retry.Policy{BaseDelay: s.pollMin, MaxDelay: s.pollMax}
	var failed []error // of the last complete round: permits whose request failed
	for n = 1; ; n++ {
		l, busy, f, err := s.round(ctx)
		switch {
		case l != nil:
			return l, nil
		case err != nil && ctx.Err() != nil:
			return nil, errors.Join(append([]error{err}, failed...)...)
		case err != nil: // the Locker was closed
			return nil, err
		case busy == 0: // every request failed: nothing to wait for
			return nil, s.roundErr(busy, f)
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

// round asks for each permit once, from a random one, until one is
// granted, and returns its lease. Otherwise busy counts the permits held
// by others and failed has the errors of the requests that failed for
// another reason, each naming its permit; err is set, and the round cut
// short, when waiting cannot help: ctx ended
// (errors.Join(distlock.ErrNotAcquired, ctx.Err())) or the Locker was
// closed (its error).
func (s *Semaphore) round(ctx context.Context) (_ distlock.Lease, busy int, failed []error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	n := len(s.keys)
	first := rand.IntN(n)
	for i := range n {
		key := s.keys[(first+i)%n]
		opts := s.opts // a copy per call, so that no Locker can change the next call's
		l, err := s.locker.TryAcquire(ctx, key, &opts)
		switch {
		case err == nil:
			return l, 0, nil, nil
		case errors.Is(err, distlock.ErrClosed):
			return nil, 0, nil, err // every other permit would say the same
		case ctx.Err() != nil:
			return nil, 0, nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		case errors.Is(err, distlock.ErrNotAcquired):
			busy++
		default:
			failed = append(failed, fmt.Errorf("%s: permit %q: %w", pkg, key, err))
		}
	}
	return nil, busy, failed, nil
}

// roundErr is the error of a round that got no permit and was not cut
// short: ErrNotAcquired (joined with the failures) if a permit was held,
// else the failures alone.
func (s *Semaphore) roundErr(busy int, failed []error) error {
	if busy == 0 {
		return errors.Join(failed...)
	}
	n := len(s.keys)
	if len(failed) == 0 {
		return fmt.Errorf("%w: %s %q: all %d permits held", distlock.ErrNotAcquired, pkg, s.name, n)
	}
	held := fmt.Errorf("%w: %s %q: %d of %d permits held, %d failed", distlock.ErrNotAcquired, pkg, s.name, busy, n, len(failed))
	return errors.Join(append([]error{held}, failed...)...)
}
