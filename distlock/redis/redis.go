package redis

import (
	"context"
	"crypto/rand"
	_ "embed" // Lua scripts
	"errors"
	"fmt"
	"reflect"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/lease"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed extend.lua
	extendLua string
	//go:embed release.lua
	releaseLua string
)

// FenceKeySuffix is appended to a lock key to name the key that records the
// highest fencing token that acquired the lock. Do not use a lock key that
// equals another lock key plus this suffix.
const FenceKeySuffix = ":fence"

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
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Margin", o.Margin}, {"RetryMin", o.RetryMin}, {"RetryMax", o.RetryMax}, {"FenceTTL", o.FenceTTL}, {"CleanupTimeout", o.CleanupTimeout}} {
		if f.v < 0 {
			return o, fmt.Errorf("%w: redis: %s %v < 0", distlock.ErrInvalidOptions, f.name, f.v)
		}
	}
	if o.RetryMin == 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax == 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.FenceTTL == 0 {
		o.FenceTTL = DefaultFenceTTL
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = DefaultCleanupTimeout
	}
	return o, nil
}

// Locker hands out leases on one Redis server. It is safe for concurrent
// use; each Acquire returns a fresh distlock.Lease.
type Locker struct {
	client  goredis.Scripter
	source  fenced.Source
	cfg     Config
	acquire *goredis.Script
	extend  *goredis.Script
	release *goredis.Script
}

var _ distlock.Locker = (*Locker)(nil)

// New returns a Locker that takes locks on client (a *redis.Client,
// *redis.Ring or *redis.ClusterClient of github.com/redis/go-redis/v9) and
// mints fencing tokens from source. It returns an error matching
// distlock.ErrInvalidOptions for a nil client or source or a negative
// Config field.
func New(client goredis.Scripter, source fenced.Source, cfg *Config) (*Locker, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: redis: nil client", distlock.ErrInvalidOptions)
	}
	if isNil(source) {
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
		acquire: goredis.NewScript(acquireLua),
		extend:  goredis.NewScript(extendLua),
		release: goredis.NewScript(releaseLua),
	}, nil
}

// isNil reports whether v is nil or a nil pointer/func/map... in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Interface, reflect.Slice:
		return rv.IsNil()
	}
	return false
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
	keys := []string{key, key + FenceKeySuffix}
	for range 2 {
		if !tok.Valid() {
			t, err := l.source.Next(ctx)
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return nil, errors.Join(distlock.ErrNotAcquired, cerr)
				}
				return nil, fmt.Errorf("redis: mint token for %q: %w", key, err)
			}
			if !t.Valid() {
				return nil, fmt.Errorf("redis: token source returned %w: %d", fenced.ErrInvalidToken, int64(t))
			}
			*tok = t
		}
		// The value is token + random holder id: compare-and-delete must
		// match exactly this acquisition, and the token stays readable.
		value := tok.String() + ":" + rand.Text()
		start := time.Now() // the server's TTL starts no earlier than this
		res, err := l.acquire.Run(ctx, l.client, keys, value, o.TTL.Milliseconds(), tok.String(), fenceTTL.Milliseconds()).Int64()
		if err != nil {
			// Unknown outcome: the SET may have been applied.
			l.cleanup(ctx, key, value)
			if cerr := ctx.Err(); cerr != nil {
				return nil, errors.Join(distlock.ErrNotAcquired, cerr)
			}
			return nil, fmt.Errorf("redis: acquire %q: %w", key, err)
		}
		switch res {
		case 1:
			ls, err := l.newLease(key, *tok, value, o, start)
			if err != nil {
				l.cleanup(ctx, key, value)
				return nil, err
			}
			return ls, nil
		case 0:
			return nil, fmt.Errorf("%w: %q is held", distlock.ErrNotAcquired, key)
		}
		*tok = 0 // stale: a higher token already acquired this key
	}
	return nil, fmt.Errorf("%w: %q: fresh token was already stale", distlock.ErrNotAcquired, key)
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
				ms := ttl.Milliseconds()
				if ms < 1 {
					return fmt.Errorf("%w: redis: TTL %v < 1ms", distlock.ErrInvalidOptions, ttl)
				}
				res, err := l.extend.Run(ctx, l.client, []string{key}, value, ms).Int64()
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
				res, err := l.release.Run(ctx, l.client, []string{key}, value).Int64()
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
	_ = l.release.Run(ctx, l.client, []string{key}, value).Err()
}
