package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/distlock/internal/redisnode"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
)

// LockKey returns the Redis key that holds the lock on key:
// "ck:{E}:lock", where E is key with '%', '{' and '}' percent-encoded.
// The hash tag {E} puts it in the same Redis Cluster slot as FenceKey(key),
// and no two keys map to the same Redis key. Operators can read a lock's
// holder with GET LockKey(key) ("<token>:<holder id>").
func LockKey(key string) string { return redisnode.LockKey(key) }

// FenceKey returns the Redis key that records the highest fencing token
// that acquired key: "ck:{E}:fence", in LockKey(key)'s hash slot.
func FenceKey(key string) string { return redisnode.FenceKey(key) }

// Default values of the zero Config fields.
const (
	DefaultPollMin        = time.Millisecond
	DefaultPollMax        = 50 * time.Millisecond
	DefaultFenceTTL       = 24 * time.Hour
	DefaultCleanupTimeout = time.Second
)

// Config tunes a Locker. A zero field means the documented default; a
// negative duration is bad input (an error matching
// concurkit.ErrInvalidArgument). Source has no default: it is required,
// so a nil *Config is an error too. New copies the Config.
type Config struct {
	// Source mints the fencing tokens (required): a fenced.Source shared
	// by every Locker of the same lock keys, e.g. a PostgreSQL sequence
	// (package fenced). A single Redis server cannot give out tokens that
	// survive its restart, so they come from storage that does; see the
	// package doc for why a token is minted before the lock is taken.
	Source fenced.Source
	// Margin is subtracted from a lease's validity (after the clock drift
	// of 1% of the TTL + 2 ms) so that the lease's Context ends before the
	// server may give the lock to someone else. Zero means 10% of the TTL,
	// at most one second.
	Margin time.Duration
	// PollMin and PollMax bound the full-jitter backoff between the
	// attempts of Acquire: after the n-th busy attempt it waits a random
	// time in [0, min(PollMax, PollMin·2^(n-1))]. Zero means
	// DefaultPollMin (1 ms) and DefaultPollMax (50 ms).
	PollMin, PollMax time.Duration
	// FenceTTL is how long the fence key (the highest token that acquired
	// a lock key) outlives the lock: every acquisition and extension makes
	// it live at least the lock's TTL plus FenceTTL from then, so it lives
	// as long as the lock is held, however often it is extended, and
	// FenceTTL past the lock's release or expiry. Zero means
	// DefaultFenceTTL (24 h).
	FenceTTL time.Duration
	// CleanupTimeout bounds each Release (together with the caller's
	// deadline). The cleanup of an acquisition whose outcome is unknown
	// (its request failed or was given up on) runs in the background and
	// is retried until the server answers, for up to the lock's TTL but
	// at least CleanupTimeout (see the package doc). Zero means
	// DefaultCleanupTimeout (1 s).
	CleanupTimeout time.Duration
}

func (c *Config) resolve() (Config, error) {
	var o Config
	if c != nil {
		o = *c
	}
	if handle.IsNil(o.Source) {
		return o, fmt.Errorf("%w: redislock: nil Config.Source (required: a fenced.Source for the fencing tokens)", concurkit.ErrInvalidArgument)
	}
	err := redisnode.ResolveDurations("redislock",
		redisnode.Duration{Name: "Margin", Field: &o.Margin},
		redisnode.Duration{Name: "PollMin", Field: &o.PollMin, Default: DefaultPollMin},
		redisnode.Duration{Name: "PollMax", Field: &o.PollMax, Default: DefaultPollMax},
		redisnode.Duration{Name: "FenceTTL", Field: &o.FenceTTL, Default: DefaultFenceTTL},
		redisnode.Duration{Name: "CleanupTimeout", Field: &o.CleanupTimeout, Default: DefaultCleanupTimeout})
	return o, err
}

// Locker hands out leases on one Redis server. It is safe for concurrent
// use; each Acquire returns a fresh distlock.Lease.
type Locker struct {
	client  goredis.Scripter
	honours bool // client applies context deadlines to its socket itself
	cfg     Config
	scripts *redisnode.Scripts
	bg      redisnode.Background
}

var (
	_ distlock.Locker = (*Locker)(nil)
	_ distlock.Closer = (*Locker)(nil)
)

// New returns a Locker that takes locks on client (a *redis.Client,
// *redis.Ring or *redis.ClusterClient of github.com/redis/go-redis/v9) and
// mints fencing tokens from cfg.Source. Any client options work: every
// call returns by its context's deadline, or at once when the context is
// cancelled, even when the client does not apply deadlines to the socket
// (go-redis without ContextTimeoutEnabled) and although no client watches
// a cancellation; with ContextTimeoutEnabled a request given up on also
// ends at the context's deadline instead of at the client's ReadTimeout.
// The client's own retries (go-redis's MaxRetries) are safe: a retried
// acquire or release is answered like the first try. It does no I/O. It returns an
// error matching concurkit.ErrInvalidArgument for a nil client (also a
// typed nil such as a nil *redis.Client), a nil cfg or cfg.Source, or a
// negative Config field.
func New(client goredis.Scripter, cfg *Config) (*Locker, error) {
	if handle.IsNil(client) {
		return nil, fmt.Errorf("%w: redislock: nil client", concurkit.ErrInvalidArgument)
	}
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Locker{
		client:  client,
		honours: redisnode.HonoursDeadline(client),
		cfg:     c,
		scripts: redisnode.NewScripts(),
	}, nil
}

// check rejects a nil Locker or one not made by New, before any I/O.
func (l *Locker) check() error {
	if l == nil || l.scripts == nil {
		return fmt.Errorf("%w: redislock: nil or zero Locker (use New)", concurkit.ErrInvalidArgument)
	}
	return nil
}

// Acquire blocks until the lock on key is acquired or ctx ends. Between
// busy attempts it backs off with full jitter (Config.PollMin/PollMax).
//
// It returns distlock.ErrInvalidKey for an empty key, an error matching
// concurkit.ErrInvalidArgument for a negative TTL or one too short to
// leave any validity after drift and margin (and for a nil Locker),
// errors.Join(distlock.ErrNotAcquired, ctx.Err()) when ctx ends first (at
// its deadline, even if the server hangs), distlock.ErrTokenExhausted
// when the token source is used up, and the wrapped error of the server
// or the token source when one fails (Acquire does not spin on a dead
// server). A lock that a failed or abandoned request may have taken is
// deleted in the background, after that request returns.
//
// An Acquire that found the lock held reports its wait to the hooks of
// ctx (observe.Hooks.LockWait), and the lease reports its extensions and
// its loss to them (see distlock.Locker).
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	var tok fenced.Token // reused while the lock is busy, re-minted when stale
	keys := redisnode.NewKeys(key)
	ls, err := lease.Poll(ctx, lease.PollPolicy{Min: l.cfg.PollMin, Max: l.cfg.PollMax, Package: pkg, Key: key, Stop: l.bg.Done()},
		func(ctx context.Context) (*lease.Lease, error) { return l.try(ctx, key, keys, o, &tok) })
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
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	var tok fenced.Token
	ls, err := l.try(ctx, key, redisnode.NewKeys(key), o, &tok)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return ls, nil
}

// pkg names the package in errors and observe events.
const pkg = "redislock"

func (l *Locker) resolve(key string, opts *distlock.Options) (distlock.Options, error) {
	if err := l.check(); err != nil {
		return distlock.Options{}, err
	}
	o, err := lease.Resolve(pkg, key, opts)
	if err != nil {
		return o, err
	}
	// The server gets the TTL rounded up to whole milliseconds, so it
	// holds the lock at least as long as the validity counted from o.TTL.
	if redisnode.NoValidity(o.TTL, lease.DefaultDrift(o.TTL), l.margin(o.TTL)) {
		return o, fmt.Errorf("%w: redislock: TTL %v leaves no validity after drift and margin", concurkit.ErrInvalidArgument, o.TTL)
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
func (l *Locker) try(ctx context.Context, key string, keys redisnode.Keys, o distlock.Options, tok *fenced.Token) (*lease.Lease, error) {
	budget := o.TTL - lease.DefaultDrift(o.TTL) - l.margin(o.TTL) // > 0: checked by resolve
	return redisnode.Attempt(ctx, l.cfg.Source, pkg, key, tok, func(tok fenced.Token, value string) (*lease.Lease, bool, error) {
		start := time.Now() // the server's TTL starts no earlier than this
		res, err, abandoned := redisnode.Request(ctx, ctx, l.honours, &l.bg,
			func(ctx context.Context) (int64, error) {
				return l.scripts.Acquire(ctx, l.client, keys, value, o.TTL, tok, l.cfg.FenceTTL)
			},
			func(n int64, err error) { // the request outlived ctx: undo it, after it
				if err != nil || n == redisnode.Acquired {
					l.retire(ctx, keys, value, tok, o.TTL)
				}
			})
		if err != nil {
			// Unknown outcome: the SET may have been applied, or may still
			// be queued in the server. An abandoned request retires the
			// acquisition itself once it returns.
			if !abandoned {
				l.bg.Go(func() { l.retire(ctx, keys, value, tok, o.TTL) })
			}
			if cerr := redisnode.Ended(ctx); cerr != nil {
				return nil, false, errors.Join(distlock.ErrNotAcquired, cerr)
			}
			return nil, false, fmt.Errorf("redislock: acquire %q: %w", key, err)
		}
		switch res {
		case redisnode.Acquired:
			if time.Since(start) >= budget {
				// The answer came too late to leave any validity: a lease
				// born expired is useless, and the lock must go.
				l.bg.Go(func() { l.retire(ctx, keys, value, tok, o.TTL) })
				return nil, false, fmt.Errorf("%w: %q: acquired after its validity (%v) was used up", distlock.ErrNotAcquired, key, budget)
			}
			ls, err := l.newLease(observe.FromContext(ctx), key, keys, tok, value, o, start)
			if err != nil {
				l.bg.Go(func() { l.retire(ctx, keys, value, tok, o.TTL) })
				return nil, false, err
			}
			return ls, false, nil
		case redisnode.Busy:
			return nil, false, fmt.Errorf("%w: %q is held", distlock.ErrNotAcquired, key)
		}
		return nil, true, fmt.Errorf("%w: %q: fresh token was already stale", distlock.ErrNotAcquired, key)
	})
}

func (l *Locker) newLease(hooks *observe.Hooks, key string, keys redisnode.Keys, tok fenced.Token, value string, o distlock.Options, start time.Time) (*lease.Lease, error) {
	return lease.New(lease.Config{
		Package: pkg,
		Group:   &l.bg,
		Hooks:   hooks,
		Key:     key,
		Token:   tok,
		TTL:     o.TTL,
		Start:   start,
		Margin:  l.margin(o.TTL),
		// The lease bounds Release's cleanup by Config.CleanupTimeout
		// itself: one deadline (one timer) for the whole cleanup.
		CleanupTimeout: l.cfg.CleanupTimeout,
		AutoExtend:     o.AutoExtend,
		Backend: lease.Backend{
			// Extend returns by ctx's end whatever the client options; a
			// request given up on finishes in the background.
			Extend: func(ctx context.Context, ttl time.Duration) error {
				if drift := lease.DefaultDrift(ttl); ttl <= drift {
					// PX would be (near) zero: the lock would vanish at once.
					return fmt.Errorf("%w: redislock: TTL %v leaves no validity after the drift %v", concurkit.ErrInvalidArgument, ttl, drift)
				}
				res, err, _ := redisnode.Request(ctx, ctx, l.honours, &l.bg, func(ctx context.Context) (int64, error) {
					return l.scripts.Extend(ctx, l.client, keys, value, ttl, l.cfg.FenceTTL)
				}, nil)
				if err != nil {
					return fmt.Errorf("redislock: extend %q: %w", key, err)
				}
				if res == 0 {
					return fmt.Errorf("%w: redislock: %q is no longer held by this lease", distlock.ErrLeaseLost, key)
				}
				return nil
			},
			Release: func(ctx context.Context) error {
				// ctx ignores the caller's cancellation and ends only at
				// CleanupTimeout (the lease's contract): the delete is cut
				// short by that alone, so nobody waits on another context.
				res, err, _ := redisnode.Request(context.Background(), ctx, l.honours, &l.bg, func(ctx context.Context) (int64, error) {
					return l.scripts.Release(ctx, l.client, keys, value)
				}, nil)
				if err != nil {
					return fmt.Errorf("redislock: release %q: %w", key, err)
				}
				if res == 0 {
					return fmt.Errorf("%w: redislock: %q was no longer held by this lease (another holder acquired it since)", distlock.ErrLeaseLost, key)
				}
				return nil
			},
		},
	})
}

// Close releases the leases of the Locker still held, ends waiting Acquire
// calls (with distlock.ErrClosed), refuses later ones, and waits for the
// requests and cleanups the Locker left running in the background — among
// them the retiring of an acquisition whose outcome is unknown, which goes
// on, against a server that does not answer, until the lock's TTL — or
// until ctx ends. See distlock.Closer for what it returns. The Redis
// client is not closed. A nil Locker's Close returns nil.
func (l *Locker) Close(ctx context.Context) error {
	if l == nil || l.scripts == nil {
		return nil
	}
	return l.bg.Close(ctx, pkg)
}

// retire undoes an acquisition with value and tok whose outcome is
// unknown, or that must not stand: it runs the retire script (delete the
// lock if it holds value, raise the fence record above tok, so that the
// SET is refused should it reach the server only later) until the server
// answers, for up to the lock's TTL (at least CleanupTimeout). It runs in
// the background, on a context the caller's cancellation cannot cut
// short. A server frozen for longer than that may still apply the SET when
// it thaws; the lock then expires by its TTL.
func (l *Locker) retire(ctx context.Context, keys redisnode.Keys, value string, tok fenced.Token, ttl time.Duration) {
	until := time.Now().Add(max(ttl, l.cfg.CleanupTimeout))
	_, _ = redisnode.Persist(context.WithoutCancel(ctx), until, func(ctx context.Context) (int64, error) {
		return l.scripts.Retire(ctx, l.client, keys, value, tok, ttl, l.cfg.FenceTTL)
	})
}
