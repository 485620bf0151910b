package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/redisnode"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/lease"
)

// FenceKeySuffix is appended to a lock key to name the key that records the
// highest fencing token that acquired the lock. Do not use a lock key that
// equals another lock key plus this suffix.
const FenceKeySuffix = redisnode.FenceKeySuffix

// Default values of the zero Config fields.
const (
	DefaultRetryMin       = time.Millisecond
	DefaultRetryMax       = 50 * time.Millisecond
	DefaultFenceTTL       = 24 * time.Hour
	DefaultCleanupTimeout = time.Second
)

// Config tunes a Locker. A nil *Config or a zero field means the documented
// default; a negative field is distlock.ErrInvalidOptions. New copies it.
type Config struct {
	// Margin is subtracted from a lease's validity (after the clock drift
	// of 1% of the TTL + 2 ms) so that the lease's Context ends before the
	// server may give the lock to someone else. Zero means 10% of the TTL,
	// at most one second.
	Margin time.Duration
	// RetryMin and RetryMax bound the full-jitter backoff between the
	// attempts of Acquire: after the n-th busy attempt it waits a random
	// time in [0, min(RetryMax, RetryMin·2^(n-1))]. Zero means
	// DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// FenceTTL is how long the fence key (the highest token that acquired
	// a lock key) outlives the last acquisition. Zero means
	// DefaultFenceTTL. It is raised to the lock TTL if shorter.
	FenceTTL time.Duration
	// CleanupTimeout bounds each best-effort delete of a lock whose
	// acquisition outcome is unknown and each Release. Zero means
	// DefaultCleanupTimeout.
	CleanupTimeout time.Duration
}

func (c *Config) resolve() (Config, error) {
	var o Config
	if c != nil {
		o = *c
	}
	err := redisnode.ResolveDurations("redis",
		redisnode.Duration{Name: "Margin", Field: &o.Margin},
		redisnode.Duration{Name: "RetryMin", Field: &o.RetryMin, Default: DefaultRetryMin},
		redisnode.Duration{Name: "RetryMax", Field: &o.RetryMax, Default: DefaultRetryMax},
		redisnode.Duration{Name: "FenceTTL", Field: &o.FenceTTL, Default: DefaultFenceTTL},
		redisnode.Duration{Name: "CleanupTimeout", Field: &o.CleanupTimeout, Default: DefaultCleanupTimeout})
	return o, err
}

// Locker hands out leases on one Redis server. It is safe for concurrent
// use; each Acquire returns a fresh distlock.Lease.
type Locker struct {
	client  goredis.Scripter
	source  fenced.Source
	cfg     Config
	scripts *redisnode.Scripts
}

var _ distlock.Locker = (*Locker)(nil)

// New returns a Locker that takes locks on client (a *redis.Client,
// *redis.Ring or *redis.ClusterClient of github.com/redis/go-redis/v9) and
// mints fencing tokens from source. It returns an error matching
// distlock.ErrInvalidOptions for a nil client or source or a negative
// Config field.
func New(client goredis.Scripter, source fenced.Source, cfg *Config) (*Locker, error) {
	if handle.IsNil(client) {
		return nil, fmt.Errorf("%w: redis: nil client", distlock.ErrInvalidOptions)
	}
	if handle.IsNil(source) {
		return nil, fmt.Errorf("%w: redis: nil fenced.Source", distlock.ErrInvalidOptions)
	}
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Locker{
		client:  client,
		source:  source,
		cfg:     c,
		scripts: redisnode.NewScripts(),
	}, nil
}

// Acquire blocks until the lock on key is acquired or ctx ends. Between
// busy attempts it backs off with full jitter (Config.RetryMin/RetryMax).
//
// It returns distlock.ErrInvalidKey for an empty key,
// distlock.ErrInvalidOptions for a negative TTL or one too short to leave
// any validity after drift and margin, errors.Join(distlock.ErrNotAcquired,
// ctx.Err()) when ctx ends first, and the wrapped error of the server or
// the token source when one fails (Acquire does not spin on a dead server;
// a lock the failed request may have taken is deleted).
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	var tok fenced.Token // reused while the lock is busy, re-minted when stale
	ls, err := lease.Poll(ctx, lease.PollPolicy{Min: l.cfg.RetryMin, Max: l.cfg.RetryMax},
		func(ctx context.Context) (*lease.Lease, error) { return l.try(ctx, key, o, &tok) })
	if err != nil {
		return nil, err
	}
	return ls, nil
}

// TryAcquire makes one attempt with a freshly minted token. It returns an
// error matching distlock.ErrNotAcquired at once if the lock is held, and
// otherwise the errors of Acquire.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	var tok fenced.Token
	ls, err := l.try(ctx, key, o, &tok)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return ls, nil
}

func (l *Locker) resolve(key string, opts *distlock.Options) (distlock.Options, error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return o, err
	}
	// The server counts whole milliseconds; never assume more than it grants.
	o.TTL = o.TTL.Truncate(time.Millisecond)
	if o.TTL <= 0 || o.TTL-lease.DefaultDrift(o.TTL)-l.margin(o.TTL) <= 0 {
		return o, fmt.Errorf("%w: redis: TTL %v leaves no validity after drift and margin", distlock.ErrInvalidOptions, opts.TTL)
	}
	return o, nil
}

func (l *Locker) margin(ttl time.Duration) time.Duration {
	if l.cfg.Margin > 0 {
		return l.cfg.Margin
	}
	return lease.DefaultMargin(ttl)
}

// try makes one acquisition attempt. *tok is the token minted by an
// earlier attempt, or zero; it is replaced when the server says a higher
// token already acquired the key (then the attempt is repeated at once).
func (l *Locker) try(ctx context.Context, key string, o distlock.Options, tok *fenced.Token) (*lease.Lease, error) {
	fenceTTL := max(l.cfg.FenceTTL, o.TTL)
	return redisnode.Attempt(ctx, l.source, "redis", key, tok, func(tok fenced.Token, value string) (*lease.Lease, bool, error) {
		start := time.Now() // the server's TTL starts no earlier than this
		res, err := l.scripts.Acquire(ctx, l.client, key, value, o.TTL, tok, fenceTTL)
		if err != nil {
			// Unknown outcome: the SET may have been applied.
			l.cleanup(ctx, key, value)
			if cerr := ctx.Err(); cerr != nil {
				return nil, false, errors.Join(distlock.ErrNotAcquired, cerr)
			}
			return nil, false, fmt.Errorf("redis: acquire %q: %w", key, err)
		}
		switch res {
		case redisnode.Acquired:
			ls, err := l.newLease(key, tok, value, o, start)
			if err != nil {
				l.cleanup(ctx, key, value)
				return nil, false, err
			}
			return ls, false, nil
		case redisnode.Busy:
			return nil, false, fmt.Errorf("%w: %q is held", distlock.ErrNotAcquired, key)
		}
		return nil, true, fmt.Errorf("%w: %q: fresh token was already stale", distlock.ErrNotAcquired, key)
	})
}

func (l *Locker) newLease(key string, tok fenced.Token, value string, o distlock.Options, start time.Time) (*lease.Lease, error) {
	return lease.New(lease.Config{
		Key:        key,
		Token:      tok,
		TTL:        o.TTL,
		Start:      start,
		Margin:     l.margin(o.TTL),
		AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend: func(ctx context.Context, ttl time.Duration) error {
				if ttl.Milliseconds() < 1 {
					return fmt.Errorf("%w: redis: TTL %v < 1ms", distlock.ErrInvalidOptions, ttl)
				}
				res, err := l.scripts.Extend(ctx, l.client, key, value, ttl)
				if err != nil {
					return fmt.Errorf("redis: extend %q: %w", key, err)
				}
				if res == 0 {
					return fmt.Errorf("%w: redis: %q is no longer held by this lease", distlock.ErrLeaseLost, key)
				}
				return nil
			},
			Release: func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, l.cfg.CleanupTimeout)
				defer cancel()
				res, err := l.scripts.Release(ctx, l.client, key, value)
				if err != nil {
					return fmt.Errorf("redis: release %q: %w", key, err)
				}
				if res == 0 {
					return fmt.Errorf("%w: redis: %q was no longer held by this lease", distlock.ErrLeaseLost, key)
				}
				return nil
			},
		},
	})
}

// cleanup deletes key if it still holds value, ignoring errors: it runs
// after a request whose outcome is unknown, on a context that the
// caller's cancellation cannot cut short.
func (l *Locker) cleanup(ctx context.Context, key, value string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CleanupTimeout)
	defer cancel()
	_, _ = l.scripts.Release(ctx, l.client, key, value)
}
