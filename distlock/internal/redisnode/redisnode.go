package redisnode

import (
	"context"
	"crypto/rand"
	_ "embed" // Lua scripts
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed extend.lua
	extendLua string
	//go:embed release.lua
	releaseLua string
)

// FenceKeySuffix is appended to a lock key to name the key that records,
// on each node, the highest fencing token that acquired the lock there.
const FenceKeySuffix = ":fence"

// Answers of the acquire script.
const (
	Acquired int64 = 1  // the lock was free and is now ours
	Busy     int64 = 0  // another holder has the lock
	Stale    int64 = -1 // a higher token already acquired the key: mint a new one
)

// Scripts runs the lock scripts on a node. Create it once with NewScripts
// (each script's SHA1 is computed there); it is safe for concurrent use.
type Scripts struct {
	acquire, extend, release *goredis.Script
}

// NewScripts returns the acquire, extend and release scripts.
func NewScripts() *Scripts {
	return &Scripts{
		acquire: goredis.NewScript(acquireLua),
		extend:  goredis.NewScript(extendLua),
		release: goredis.NewScript(releaseLua),
	}
}

// Acquire runs the acquire script on c: it sets key to value for ttl if
// key is free and tok is not lower than the highest token recorded in
// key + FenceKeySuffix, which then records tok for fenceTTL. It returns
// Acquired, Busy or Stale, or the error of the request (outcome unknown:
// the lock may have been taken).
func (s *Scripts) Acquire(ctx context.Context, c goredis.Scripter, key, value string, ttl time.Duration, tok fenced.Token, fenceTTL time.Duration) (int64, error) {
	return s.acquire.Run(ctx, c, []string{key, key + FenceKeySuffix},
		value, ttl.Milliseconds(), tok.String(), fenceTTL.Milliseconds()).Int64()
}

// Extend renews key for ttl (whole milliseconds) if it still holds value.
// It returns 1 (renewed) or 0 (not ours any more).
func (s *Scripts) Extend(ctx context.Context, c goredis.Scripter, key, value string, ttl time.Duration) (int64, error) {
	return s.extend.Run(ctx, c, []string{key}, value, ttl.Milliseconds()).Int64()
}

// Release deletes key if it still holds value. It returns 1 (deleted) or
// 0 (not ours any more).
func (s *Scripts) Release(ctx context.Context, c goredis.Scripter, key, value string) (int64, error) {
	return s.release.Run(ctx, c, []string{key}, value).Int64()
}

// Value returns a lock value for one acquisition with tok: the token (so
// it stays readable on the server) and a random holder id (so
// compare-and-delete matches exactly this acquisition).
func Value(tok fenced.Token) string {
	return tok.String() + ":" + rand.Text()
}

// Attempt makes one acquisition attempt with the token in *tok, minting
// one from source first when *tok is zero. try takes the lock with that
// token and a fresh Value; it reports stale when a node answered that a
// higher token already acquired the key. Then *tok is reset and try runs
// once more with a freshly minted token; if that one is stale too, the
// second try's error is returned. Otherwise Attempt returns what try
// returned, and *tok keeps the token for the next attempt (reused while
// the lock is merely busy: no round trip to the source per poll).
//
// pkg prefixes the errors of minting ("redis", "redlock"). When minting
// fails Attempt returns errors.Join(distlock.ErrNotAcquired, ctx.Err()) if
// ctx has ended and the wrapped error of source otherwise; an invalid
// token from source is fenced.ErrInvalidToken.
func Attempt[L any](ctx context.Context, source fenced.Source, pkg, key string, tok *fenced.Token,
	try func(tok fenced.Token, value string) (l L, stale bool, err error)) (L, error) {
	var zero L
	var err error
	for range 2 {
		if !tok.Valid() {
			t, merr := source.Next(ctx)
			if merr != nil {
				if cerr := ctx.Err(); cerr != nil {
					return zero, errors.Join(distlock.ErrNotAcquired, cerr)
				}
				return zero, fmt.Errorf("%s: mint token for %q: %w", pkg, key, merr)
			}
			if !t.Valid() {
				return zero, fmt.Errorf("%s: token source returned %w: %d", pkg, fenced.ErrInvalidToken, int64(t))
			}
			*tok = t
		}
		var l L
		var stale bool
		l, stale, err = try(*tok, Value(*tok))
		if !stale {
			return l, err
		}
		*tok = 0
	}
	return zero, err
}

// Duration is one duration field of a backend's Config: its name (for the
// error message), the field, and the default that replaces zero.
type Duration struct {
	Name    string
	Field   *time.Duration
	Default time.Duration
}

// ResolveDurations returns an error matching distlock.ErrInvalidOptions
// ("pkg: Name v < 0") for the first negative field and otherwise sets each
// zero field to its Default (a zero Default leaves it zero).
func ResolveDurations(pkg string, ds ...Duration) error {
	for _, d := range ds {
		if *d.Field < 0 {
			return fmt.Errorf("%w: %s: %s %v < 0", distlock.ErrInvalidOptions, pkg, d.Name, *d.Field)
		}
	}
	for _, d := range ds {
		if *d.Field == 0 {
			*d.Field = d.Default
		}
	}
	return nil
}
