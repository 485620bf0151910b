package ratelimitredis

import (
	"context"
	_ "embed" // Lua scripts
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/internal/spec"
)

const pkg = "ratelimitredis"

var (
	//go:embed window.lua
	windowLua string
	//go:embed gcra.lua
	gcraLua string
)

// The scripts, with their SHA1 computed once. A Script is immutable:
// Run sends EVALSHA and falls back to EVAL when the server does not have
// the script yet (after a restart or SCRIPT FLUSH).
var (
	windowScript = goredis.NewScript(windowLua)
	gcraScript   = goredis.NewScript(gcraLua)
	// resetScript deletes both keys of a rate-limit key (one hash slot).
	resetScript = goredis.NewScript(`return redis.call('DEL', KEYS[1], KEYS[2])`)
)

// Redis key layout. A rate-limit key k is stored as
//
//	ck:{E}:rl    the fixed-window counter (hash: e = window end, c = count)
//	ck:{E}:gcra  the GCRA theoretical arrival time (string, µs since the epoch)
//
// where E is k with '%', '{' and '}' percent-encoded, as distlock/redislock
// encodes its lock keys: E contains no '}', so the Redis Cluster hash tag
// is exactly {E}, and the encoding is injective, so two keys never share a
// Redis key.
const (
	keyPrefix    = "ck:{"
	windowSuffix = "}:rl"
	gcraSuffix   = "}:gcra"
)

var keyEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func escape(key string) string {
	if !strings.ContainsAny(key, "%{}") {
		return key
	}
	return keyEscaper.Replace(key)
}

// WindowKey returns the Redis key of key's fixed-window counter:
// "ck:{E}:rl", E being key with '%', '{' and '}' percent-encoded. It is a
// hash whose field e is the window's end (µs since the Unix epoch) and c
// the count used in it.
func WindowKey(key string) string { return keyPrefix + escape(key) + windowSuffix }

// GCRAKey returns the Redis key of key's GCRA state: "ck:{E}:gcra", a
// string holding the theoretical arrival time in µs since the Unix epoch.
func GCRAKey(key string) string { return keyPrefix + escape(key) + gcraSuffix }

// Config tunes a Limiter. The zero Config (or nil) is GCRA on the
// caller's clock. New copies it.
type Config struct {
	// Algorithm is ratelimit.GCRA (the zero value) or
	// ratelimit.FixedWindow.
	Algorithm ratelimit.Algorithm
	// Now is the clock. Nil means time.Now. Its reading is passed to the
	// scripts (which never call TIME): see the package doc on clocks.
	Now func() time.Time
}

// Limiter is a ratelimit.Limiter on Redis. It is safe for concurrent use
// and holds no state of its own: any number of Limiters, in any number of
// processes, share the counts of the same Redis server.
type Limiter struct {
	client goredis.Scripter
	algo   ratelimit.Algorithm
	now    func() time.Time
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// New returns a Limiter that keeps its counts on client (a *redis.Client,
// *redis.Ring or *redis.ClusterClient of github.com/redis/go-redis/v9). It
// does no I/O. It returns an error matching concurkit.ErrInvalidArgument
// for a nil client (also a typed nil such as a nil *redis.Client) or an
// unknown Config.Algorithm.
func New(client goredis.Scripter, cfg *Config) (*Limiter, error) {
	if handle.IsNil(client) {
		return nil, fmt.Errorf("%w: %s: nil client", concurkit.ErrInvalidArgument, pkg)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := spec.Algorithm(pkg, c.Algorithm); err != nil {
		return nil, err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Limiter{client: client, algo: c.Algorithm, now: c.Now}, nil
}

// Allow is AllowN(ctx, key, limit, 1).
func (l *Limiter) Allow(ctx context.Context, key string, limit ratelimit.Limit) (ratelimit.Decision, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN counts a request of cost n against key's limit and reports
// whether it may proceed, in one round trip (one Lua script: check and
// count are atomic, and a denied request is not counted). It returns an
// error matching concurkit.ErrInvalidArgument, before any I/O, for a nil
// or zero Limiter, an empty key, a key longer than ratelimit.MaxKeyLen or
// not valid UTF-8, a limit that is not valid for the Limiter's algorithm
// (ratelimit.Limit.Validate), n < 1, n more than the limit admits at once,
// or a clock reading outside 1970…2200. Errors of the server are wrapped
// (naming the key by ratelimit.KeyID: no error contains the key),
// and match ctx.Err() when ctx ended the call; the request may then have
// been counted (never twice, unless the client retried the script).
func (l *Limiter) AllowN(ctx context.Context, key string, limit ratelimit.Limit, n int64) (ratelimit.Decision, error) {
	if l == nil || l.client == nil {
		return ratelimit.Decision{}, fmt.Errorf("%w: %s: nil or zero Limiter (use New)", concurkit.ErrInvalidArgument, pkg)
	}
	c, err := spec.Prepare(pkg, l.algo, key, limit, n, l.now())
	if err != nil {
		return ratelimit.Decision{}, err
	}
	if c.Algo == ratelimit.FixedWindow {
		v, err := windowScript.Run(ctx, l.client, []string{WindowKey(key)}, c.WindowEnd, c.Limit.Rate, c.N, c.WindowTTL()).Int64Slice()
		if err == nil && len(v) != 3 {
			err = fmt.Errorf("unexpected answer %v", v)
		}
		if err != nil {
			return ratelimit.Decision{}, spec.StoreError(ctx, pkg, key, err)
		}
		if v[0] == 1 {
			return c.WindowAllowed(v[1], v[2]), nil
		}
		return c.WindowDenied(v[2]), nil
	}
	v, err := gcraScript.Run(ctx, l.client, []string{GCRAKey(key)}, c.Now, c.Inc, c.Tau, spec.GCRAGraceMillis).Int64Slice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("unexpected answer %v", v)
	}
	if err != nil {
		return ratelimit.Decision{}, spec.StoreError(ctx, pkg, key, err)
	}
	if v[0] == 1 {
		return c.GCRAAllowed(v[1]), nil
	}
	return c.GCRADenied(v[1]), nil
}

// Reset forgets key's counts (both algorithms' state), so its next request
// starts with the full quota. It returns an error matching
// concurkit.ErrInvalidArgument for a bad key or a nil Limiter, and the
// wrapped server error otherwise.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l == nil || l.client == nil {
		return fmt.Errorf("%w: %s: nil or zero Limiter (use New)", concurkit.ErrInvalidArgument, pkg)
	}
	if err := spec.Key(pkg, key); err != nil {
		return err
	}
	if err := resetScript.Run(ctx, l.client, []string{WindowKey(key), GCRAKey(key)}).Err(); err != nil {
		return spec.StoreError(ctx, pkg, key, err)
	}
	return nil
}
