package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/redisnode"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/lease"
)

// FenceKeySuffix is appended to a lock key to name the key that records, on
// each master, the highest fencing token that acquired the lock there.
const FenceKeySuffix = redisnode.FenceKeySuffix

// Default values of the zero Config fields.
const (
	DefaultNodeTimeout    = 50 * time.Millisecond
	DefaultDriftFactor    = 0.01
	DefaultRetryMin       = 5 * time.Millisecond
	DefaultRetryMax       = 100 * time.Millisecond
	DefaultFenceTTL       = 24 * time.Hour
	DefaultCleanupTimeout = time.Second
)

// driftConst is the constant part of the clock-drift allowance (Redlock
// paper: 2 ms for the granularity of the Redis expire clock).
const driftConst = 2 * time.Millisecond

// ErrNoQuorum is returned by Extend and Release when fewer than a majority of
// the masters answered, so the outcome is unknown: Extend leaves the lease
// running until its current deadline; after Release the lock expires by its
// TTL on the masters that did not answer.
var ErrNoQuorum = errors.New("redlock: no quorum")

// Config tunes a Locker. A nil *Config or a zero field means the documented
// default; a negative field is distlock.ErrInvalidOptions. New copies it.
type Config struct {
	// NodeTimeout bounds each acquire and extend request to one master
	// (deletes use CleanupTimeout). Zero means DefaultNodeTimeout. Keep it far below the TTL:
	// a slow master must not eat the validity.
	NodeTimeout time.Duration
	// DriftFactor scales the clock-drift allowance DriftFactor·TTL + 2 ms
	// subtracted from the validity. Zero means DefaultDriftFactor; it must
	// be below 1.
	DriftFactor float64
	// Margin is a further safety margin subtracted from a lease's validity
	// so its Context ends before a master may give the lock away. Zero
	// means 10% of the TTL, at most one second.
	Margin time.Duration
	// RetryMin and RetryMax bound the full-jitter backoff between the
	// attempts of Acquire: after the n-th failed attempt it waits a random
	// time in [0, min(RetryMax, RetryMin·2^(n-1))]. Zero means
	// DefaultRetryMin and DefaultRetryMax, wider than a single server's:
	// an attempt costs a request per master, and waiters that retry too
	// close together split the masters' votes so that nobody wins.
	RetryMin, RetryMax time.Duration
	// FenceTTL is how long each master's fence key (the highest token that
	// acquired a lock key) outlives the last acquisition. Zero means
	// DefaultFenceTTL. It is raised to the lock TTL if shorter.
	FenceTTL time.Duration
	// CleanupTimeout bounds each master's compare-and-delete, after a
	// failed attempt and on Release. It is longer than NodeTimeout: a
	// delete does not race the validity, and one that gives up leaves the
	// lock on that master until its TTL. Zero means DefaultCleanupTimeout.
	CleanupTimeout time.Duration
}

func (c *Config) resolve() (Config, error) {
	var o Config
	if c != nil {
		o = *c
	}
	err := redisnode.ResolveDurations("redlock",
		redisnode.Duration{Name: "NodeTimeout", Field: &o.NodeTimeout, Default: DefaultNodeTimeout},
		redisnode.Duration{Name: "Margin", Field: &o.Margin},
		redisnode.Duration{Name: "RetryMin", Field: &o.RetryMin, Default: DefaultRetryMin},
		redisnode.Duration{Name: "RetryMax", Field: &o.RetryMax, Default: DefaultRetryMax},
		redisnode.Duration{Name: "FenceTTL", Field: &o.FenceTTL, Default: DefaultFenceTTL},
		redisnode.Duration{Name: "CleanupTimeout", Field: &o.CleanupTimeout, Default: DefaultCleanupTimeout})
	if err != nil {
		return o, err
	}
	if o.DriftFactor < 0 || o.DriftFactor >= 1 || o.DriftFactor != o.DriftFactor {
		return o, fmt.Errorf("%w: redlock: DriftFactor %v not in [0, 1)", distlock.ErrInvalidOptions, o.DriftFactor)
	}
	if o.DriftFactor == 0 {
		o.DriftFactor = DefaultDriftFactor
	}
	return o, nil
}

// Locker hands out leases held on a majority of independent Redis masters.
// It is safe for concurrent use; each Acquire returns a fresh
// distlock.Lease.
type Locker struct {
	nodes   []goredis.Scripter
	quorum  int
	source  fenced.Source
	cfg     Config
	scripts *redisnode.Scripts
}

var _ distlock.Locker = (*Locker)(nil)

// New returns a Locker over nodes, one client per independent master
// (typically *redis.Client of github.com/redis/go-redis/v9; not replicas of
// one another, not a cluster), minting fencing tokens from source. The
// quorum is len(nodes)/2+1. It returns an error matching
// distlock.ErrInvalidOptions for no nodes, a nil node or source, or an
// invalid Config field.
func New[C goredis.Scripter](nodes []C, source fenced.Source, cfg *Config) (*Locker, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: redlock: no nodes", distlock.ErrInvalidOptions)
	}
	ns := make([]goredis.Scripter, len(nodes))
	for i, n := range nodes {
		if handle.IsNil(n) {
			return nil, fmt.Errorf("%w: redlock: node %d is nil", distlock.ErrInvalidOptions, i)
		}
		ns[i] = n
	}
	if handle.IsNil(source) {
		return nil, fmt.Errorf("%w: redlock: nil fenced.Source", distlock.ErrInvalidOptions)
	}
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Locker{
		nodes:   ns,
		quorum:  len(ns)/2 + 1,
		source:  source,
		cfg:     c,
		scripts: redisnode.NewScripts(),
	}, nil
}

// Quorum returns the number of masters that must hold a lock: N/2+1.
func (l *Locker) Quorum() int { return l.quorum }

// Acquire blocks until the lock on key is held by a majority of the masters
// within its validity, or ctx ends. Failed attempts (busy, no majority,
// validity used up, masters down) are retried with full-jitter backoff
// (Config.RetryMin/RetryMax) after deleting the attempt's lock on every
// master. A retry first asks one random master and goes on to the others
// only if that one accepted (or did not answer), so polling a busy lock
// costs one request per poll.
//
// It returns distlock.ErrInvalidKey for an empty key,
// distlock.ErrInvalidOptions for a negative TTL or one too short to leave
// any validity, errors.Join(distlock.ErrNotAcquired, ctx.Err()) when ctx
// ends first, and the wrapped error of the token source when it fails.
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	var st attempts
	ls, err := lease.Poll(ctx, lease.PollPolicy{Min: l.cfg.RetryMin, Max: l.cfg.RetryMax},
		func(ctx context.Context) (*lease.Lease, error) { return l.try(ctx, key, o, &st) })
	if err != nil {
		return nil, err
	}
	return ls, nil
}

// TryAcquire makes one attempt with a freshly minted token. It returns an
// error matching distlock.ErrNotAcquired at once if no majority could be
// reached (the lock is held, or too many masters are down), and otherwise
// the errors of Acquire.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	var st attempts
	ls, err := l.try(ctx, key, o, &st)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return ls, nil
}

func (l *Locker) drift(ttl time.Duration) time.Duration {
	return time.Duration(l.cfg.DriftFactor*float64(ttl)) + driftConst
}

func (l *Locker) margin(ttl time.Duration) time.Duration {
	if l.cfg.Margin > 0 {
		return l.cfg.Margin
	}
	return lease.DefaultMargin(ttl)
}

func (l *Locker) resolve(key string, opts *distlock.Options) (distlock.Options, error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return o, err
	}
	o.TTL = o.TTL.Truncate(time.Millisecond) // masters count whole milliseconds
	if o.TTL <= 0 || o.TTL-l.drift(o.TTL)-l.margin(o.TTL) <= 0 {
		return o, fmt.Errorf("%w: redlock: TTL %v leaves no validity after drift and margin", distlock.ErrInvalidOptions, opts.TTL)
	}
	return o, nil
}

// reply is one master's answer.
type reply struct {
	n   int64
	err error
}

// tally counts the replies: yes = 1, no = 0, stale = -1, failed = errors.
type tally struct {
	yes, no, stale, failed int
	firstErr               error
}

func count(rs []reply) tally {
	var t tally
	for _, r := range rs {
		switch {
		case r.err != nil:
			t.failed++
			if t.firstErr == nil {
				t.firstErr = r.err
			}
		case r.n == 1:
			t.yes++
		case r.n == -1:
			t.stale++
		default:
			t.no++
		}
	}
	return t
}

// fanout runs op on every master in parallel, each under its own
// NodeTimeout, and waits for all of them (no request outlives the call).
func (l *Locker) fanout(ctx context.Context, op func(ctx context.Context, c goredis.Scripter) (int64, error)) []reply {
	return l.fanoutExcept(ctx, -1, l.cfg.NodeTimeout, op)
}

// fanoutExcept is fanout without master skip (none if skip < 0), with
// the given per-master timeout.
func (l *Locker) fanoutExcept(ctx context.Context, skip int, timeout time.Duration, op func(ctx context.Context, c goredis.Scripter) (int64, error)) []reply {
	nodes := l.nodes
	if skip >= 0 {
		nodes = make([]goredis.Scripter, 0, len(l.nodes)-1)
		nodes = append(nodes, l.nodes[:skip]...)
		nodes = append(nodes, l.nodes[skip+1:]...)
	}
	out := make([]reply, len(nodes))
	var wg sync.WaitGroup
	for i, c := range nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i].n, out[i].err = op(nctx, c)
		})
	}
	wg.Wait()
	return out
}

// attempts is the state Acquire carries from one attempt to the next.
type attempts struct {
	tok fenced.Token // reused while the lock is busy, re-minted when stale
	n   int          // attempts made
}

// acquireOn runs the acquire script on every master. On a retry (probe) it
// first asks one random master alone and stops there if that master
// refuses: a waiter polling a busy lock then costs one request per poll
// instead of N. The probe is part of the attempt: its time counts against
// the validity like the rest of the fan-out.
func (l *Locker) acquireOn(ctx context.Context, probe bool, op func(ctx context.Context, c goredis.Scripter) (int64, error)) tally {
	if !probe || len(l.nodes) == 1 {
		return count(l.fanout(ctx, op))
	}
	i := rand.IntN(len(l.nodes))
	nctx, cancel := context.WithTimeout(ctx, l.cfg.NodeTimeout)
	first := reply{}
	first.n, first.err = op(nctx, l.nodes[i])
	cancel()
	if first.err == nil && first.n != 1 {
		return count([]reply{first}) // busy or stale there: this attempt cannot be trusted to win
	}
	if first.err != nil {
		return count(l.fanout(ctx, op)) // unknown: ask everyone, that master again too
	}
	return count(append(l.fanoutExcept(ctx, i, l.cfg.NodeTimeout, op), first))
}

// try makes one acquisition attempt; see redis.Locker for the token rule.
func (l *Locker) try(ctx context.Context, key string, o distlock.Options, st *attempts) (*lease.Lease, error) {
	st.n++
	probe := st.n > 1
	fenceTTL := max(l.cfg.FenceTTL, o.TTL)
	drift, margin := l.drift(o.TTL), l.margin(o.TTL)
	return redisnode.Attempt(ctx, l.source, "redlock", key, &st.tok, func(tok fenced.Token, value string) (*lease.Lease, bool, error) {
		start := time.Now() // every master's TTL starts no earlier than this
		t := l.acquireOn(ctx, probe, func(ctx context.Context, c goredis.Scripter) (int64, error) {
			return l.scripts.Acquire(ctx, c, key, value, o.TTL, tok, fenceTTL)
		})
		validity := o.TTL - time.Since(start) - drift - margin
		if t.yes >= l.quorum && validity > 0 {
			ls, err := l.newLease(key, tok, value, o, start, drift, margin)
			if err == nil {
				return ls, false, nil
			}
			l.releaseAll(ctx, key, value)
			return nil, false, err
		}
		// Failed: delete on every master, including those that timed out
		// (their SET may have landed after the deadline). Skipped only
		// when every master answered that it did not take the lock.
		if t.yes > 0 || t.failed > 0 {
			l.releaseAll(ctx, key, value)
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, false, errors.Join(distlock.ErrNotAcquired, cerr)
		}
		// A higher token already acquired on some master: mint anew.
		return nil, t.stale > 0, l.notAcquired(key, t)
	})
}

// notAcquired is the error of an attempt that did not reach a quorum.
func (l *Locker) notAcquired(key string, t tally) error {
	if t.firstErr != nil {
		return fmt.Errorf("%w: redlock: %q: %d of %d masters accepted (quorum %d; %d busy, %d stale token, %d failed, first: %v)",
			distlock.ErrNotAcquired, key, t.yes, len(l.nodes), l.quorum, t.no, t.stale, t.failed, t.firstErr)
	}
	return fmt.Errorf("%w: redlock: %q: %d of %d masters accepted (quorum %d; %d busy, %d stale token)",
		distlock.ErrNotAcquired, key, t.yes, len(l.nodes), l.quorum, t.no, t.stale)
}

// releaseAll deletes the lock on every master where it holds value, on a
// context the caller's cancellation cannot cut short.
func (l *Locker) releaseAll(ctx context.Context, key, value string) tally {
	ctx = context.WithoutCancel(ctx)
	return count(l.fanoutExcept(ctx, -1, l.cfg.CleanupTimeout, func(ctx context.Context, c goredis.Scripter) (int64, error) {
		return l.scripts.Release(ctx, c, key, value)
	}))
}

func (l *Locker) newLease(key string, tok fenced.Token, value string, o distlock.Options, start time.Time, drift, margin time.Duration) (*lease.Lease, error) {
	n := len(l.nodes)
	return lease.New(lease.Config{
		Key:        key,
		Token:      tok,
		TTL:        o.TTL,
		Start:      start,
		Drift:      drift,
		Margin:     margin,
		AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend: func(ctx context.Context, ttl time.Duration) error {
				if ttl.Milliseconds() < 1 {
					return fmt.Errorf("%w: redlock: TTL %v < 1ms", distlock.ErrInvalidOptions, ttl)
				}
				start := time.Now()
				t := count(l.fanout(ctx, func(ctx context.Context, c goredis.Scripter) (int64, error) {
					return l.scripts.Extend(ctx, c, key, value, ttl)
				}))
				switch {
				case t.yes >= l.quorum && ttl-time.Since(start)-l.drift(ttl) > 0:
					return nil
				case t.no > n-l.quorum:
					// A majority can no longer be ours.
					return fmt.Errorf("%w: redlock: %q held by this lease on %d of %d masters", distlock.ErrLeaseLost, key, t.yes, n)
				case t.firstErr != nil:
					return fmt.Errorf("%w: extend %q: %d of %d masters renewed (first error: %v)", ErrNoQuorum, key, t.yes, n, t.firstErr)
				}
				return fmt.Errorf("%w: extend %q: %d of %d masters renewed", ErrNoQuorum, key, t.yes, n)
			},
			Release: func(ctx context.Context) error {
				t := l.releaseAll(ctx, key, value)
				switch {
				case t.yes > 0 && t.yes+t.no >= l.quorum:
					return nil
				case t.yes == 0 && t.no >= l.quorum:
					return fmt.Errorf("%w: redlock: %q was no longer held by this lease", distlock.ErrLeaseLost, key)
				case t.firstErr != nil:
					return fmt.Errorf("%w: release %q: %d of %d masters answered (first error: %v)", ErrNoQuorum, key, t.yes+t.no, n, t.firstErr)
				}
				return fmt.Errorf("%w: release %q: %d of %d masters answered", ErrNoQuorum, key, t.yes+t.no, n)
			},
		},
	})
}
