package redislock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
)

// fixedSource mints the same token every time.
type fixedSource fenced.Token

func (s fixedSource) Next(context.Context) (fenced.Token, error) { return fenced.Token(s), nil }

// counterFrom counts up from its start and, like a careless int64
// counter, wraps around past math.MaxInt64.
type counterFrom struct{ n int64 }

func (c *counterFrom) Next(context.Context) (fenced.Token, error) {
	c.n++ // wraps: math.MaxInt64 + 1 = math.MinInt64
	return fenced.Token(c.n), nil
}

// A nil *distlock.Options with a Config whose margin leaves no validity
// must be a clear error: the message used to print opts.TTL and panicked.
func TestNilOptionsInvalidConfig(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = c.Close() })
	l, err := redislock.New(c, &redislock.Config{Source: &counter{}, Margin: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(context.Context, string, *distlock.Options) (distlock.Lease, error){"Acquire": l.Acquire, "TryAcquire": l.TryAcquire} {
		ls, err := f(t.Context(), "k", nil)
		if !errors.Is(err, concurkit.ErrInvalidArgument) || ls != nil {
			t.Fatalf("%s(nil opts) = %v, %v; want ErrInvalidArgument", name, ls, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestTypedNilClients(t *testing.T) {
	for name, c := range map[string]goredis.Scripter{
		"*redislock.Client":        (*goredis.Client)(nil),
		"*redislock.ClusterClient": (*goredis.ClusterClient)(nil),
		"*redislock.Ring":          (*goredis.Ring)(nil),
	} {
		l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
		if !errors.Is(err, concurkit.ErrInvalidArgument) || l != nil {
			t.Errorf("New(nil %s) = %v, %v; want ErrInvalidArgument", name, l, err)
		}
	}
}

// TTL edges: the server gets whole milliseconds rounded up; a margin or
// TTL near math.MaxInt64 must neither overflow into a bogus validity nor
// be refused by the server.
func TestTTLEdges(t *testing.T) {
	c, prefix := redisEnv(t)
	ctx := t.Context()

	t.Run("margin near MaxInt64", func(t *testing.T) {
		// 1ms − drift − MaxInt64 overflowed to ~+292 years: the lease
		// believed it was valid for centuries on a 1 ms server key.
		l, err := redislock.New(c, &redislock.Config{Source: &counter{}, Margin: math.MaxInt64})
		if err != nil {
			t.Fatal(err)
		}
		for _, ttl := range []time.Duration{time.Millisecond, 10 * time.Second, math.MaxInt64} {
			ls, err := l.TryAcquire(ctx, prefix+"margin", &distlock.Options{TTL: ttl})
			if !errors.Is(err, concurkit.ErrInvalidArgument) {
				if ls != nil {
					t.Errorf("TTL %v: lease valid until %v", ttl, deadline(t, ls))
					_ = ls.Release(ctx)
				}
				t.Fatalf("TTL %v, Margin MaxInt64: %v, want ErrInvalidArgument", ttl, err)
			}
		}
	})

	t.Run("TTL MaxInt64", func(t *testing.T) {
		l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
		if err != nil {
			t.Fatal(err)
		}
		key := prefix + "forever"
		ls, err := l.TryAcquire(ctx, key, &distlock.Options{TTL: math.MaxInt64})
		if err != nil {
			t.Fatalf("TryAcquire(TTL MaxInt64) = %v", err)
		}
		defer ls.Release(ctx)
		// Raw milliseconds: go-redis's PTTL → time.Duration overflows here.
		if ms, err := c.Do(ctx, "PTTL", redislock.LockKey(key)).Int64(); err != nil || ms < 9223372036854-1000 {
			t.Fatalf("PTTL = %d ms, %v; want ~9223372036855 (292 years)", ms, err)
		}
		if d := time.Until(deadline(t, ls)); d < 100*365*24*time.Hour {
			t.Fatalf("validity %v, want ~290 years", d)
		}
		if err := ls.Extend(ctx, math.MaxInt64); err != nil {
			t.Fatalf("Extend(MaxInt64) = %v", err)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}
	})

	t.Run("Extend without validity", func(t *testing.T) {
		// A TTL within the drift used to go to the server as PX 1 (or 0,
		// an error): the lock vanished at once.
		l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
		if err != nil {
			t.Fatal(err)
		}
		key := prefix + "short"
		ls, err := l.TryAcquire(ctx, key, &distlock.Options{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer ls.Release(ctx)
		for _, ttl := range []time.Duration{time.Nanosecond, time.Millisecond, 2 * time.Millisecond} {
			if err := ls.Extend(ctx, ttl); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("Extend(%v) = %v, want ErrInvalidArgument", ttl, err)
			}
		}
		if pttl := c.PTTL(ctx, redislock.LockKey(key)).Val(); pttl < 9*time.Second {
			t.Fatalf("PTTL after refused Extends = %v, want the 10 s lock intact", pttl)
		}
		if ls.Context().Err() != nil {
			t.Fatal("lease ended by a refused Extend")
		}
	})
}

// Token edges: tokens near math.MaxInt64 keep their order on the server
// (compared as decimal strings, not Lua doubles), equal tokens are
// accepted, and a source that overflows is refused, never stored.
func TestTokenEdges(t *testing.T) {
	c, prefix := redisEnv(t)
	ctx := t.Context()
	opts := &distlock.Options{TTL: 5 * time.Second}

	t.Run("MaxInt64", func(t *testing.T) {
		key := prefix + "max"
		l, err := redislock.New(c, &redislock.Config{Source: fixedSource(math.MaxInt64)})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // equal tokens are accepted: the fence allows ≥
			ls, err := l.TryAcquire(ctx, key, opts)
			if err != nil {
				t.Fatal(err)
			}
			if v := c.Get(ctx, redislock.LockKey(key)).Val(); !strings.HasPrefix(v, "9223372036854775807:") {
				t.Fatalf("lock value %q", v)
			}
			if err := ls.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		below, err := redislock.New(c, &redislock.Config{Source: fixedSource(math.MaxInt64 - 1)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := below.TryAcquire(ctx, key, opts); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("MaxInt64-1 after MaxInt64 = %v, want ErrNotAcquired (stale)", err)
		}
	})

	t.Run("overflowing source", func(t *testing.T) {
		src := &counterFrom{n: math.MaxInt64 - 1}
		l, err := redislock.New(c, &redislock.Config{Source: src})
		if err != nil {
			t.Fatal(err)
		}
		key := prefix + "wrap"
		ls, err := l.TryAcquire(ctx, key, opts) // MaxInt64
		if err != nil {
			t.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if ls, err := l.TryAcquire(ctx, key, opts); !errors.Is(err, fenced.ErrInvalidToken) || ls != nil { // MinInt64
			t.Fatalf("wrapped token: %v, %v; want fenced.ErrInvalidToken", ls, err)
		}
		for _, tok := range []fenced.Token{0, -1} {
			l, _ := redislock.New(c, &redislock.Config{Source: fixedSource(tok)})
			if _, err := l.TryAcquire(ctx, key, opts); !errors.Is(err, fenced.ErrInvalidToken) {
				t.Fatalf("token %d: %v, want fenced.ErrInvalidToken", tok, err)
			}
		}
		if n := c.Exists(ctx, redislock.LockKey(key)).Val(); n != 0 {
			t.Fatal("an invalid token took the lock")
		}
	})

	t.Run("digit count", func(t *testing.T) {
		// 10 digits beat 9 although "999999999" > "1000000000" bytewise.
		l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
		if err != nil {
			t.Fatal(err)
		}
		key := prefix + "digits"
		for _, step := range []struct {
			tok  fenced.Token
			want int64
		}{{999999999, 1}, {1000000000, 1}, {999999999, -1}, {math.MaxInt64, 1}, {1000000000, -1}} {
			if err := c.Del(ctx, redislock.LockKey(key)).Err(); err != nil {
				t.Fatal(err)
			}
			if res, err := l.AttemptWithToken(ctx, key, time.Second, step.tok); err != nil || res != step.want {
				t.Fatalf("token %d: %d, %v; want %d", step.tok, res, err, step.want)
			}
		}
	})
}
