package redlock_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/fenced"
)

// fixedSource mints the same token every time.
type fixedSource fenced.Token

func (s fixedSource) Next(context.Context) (fenced.Token, error) { return fenced.Token(s), nil }

// A nil *distlock.Options with a Config whose margin leaves no validity
// must be a clear error: the message used to print opts.TTL and panicked.
func TestNilOptionsInvalidConfig(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = c.Close() })
	l, err := redlock.New([]*goredis.Client{c}, &redlock.Config{Source: &counter{}, Margin: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(context.Context, string, *distlock.Options) (distlock.Lease, error){"Acquire": l.Acquire, "TryAcquire": l.TryAcquire} {
		ls, err := f(t.Context(), "k", nil)
		if !errors.Is(err, concurkit.ErrInvalidArgument) || ls != nil {
			t.Fatalf("%s(nil opts) = %v, %v; want ErrInvalidArgument", name, ls, err)
		}
	}
}

func TestTypedNilClients(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	for name, n := range map[string]goredis.Scripter{
		"*redis.Client":        (*goredis.Client)(nil),
		"*redis.ClusterClient": (*goredis.ClusterClient)(nil),
		"*redis.Ring":          (*goredis.Ring)(nil),
	} {
		l, err := redlock.New([]goredis.Scripter{c, n, c}, &redlock.Config{Source: &counter{}})
		if !errors.Is(err, concurkit.ErrInvalidArgument) || l != nil {
			t.Errorf("New with a nil %s = %v, %v; want ErrInvalidArgument", name, l, err)
		}
	}
}

// Duration edges: no arithmetic near math.MaxInt64 may overflow into a
// bogus validity, and the masters accept the largest TTL.
func TestTTLEdges(t *testing.T) {
	cs, prefix := redlockEnv(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		cfg  redlock.Config
		ttl  time.Duration
	}{
		// 1ms − drift − MaxInt64 overflowed to ~+292 years.
		{"margin MaxInt64", redlock.Config{Margin: math.MaxInt64}, time.Millisecond},
		// DriftFactor·MaxInt64 + 2ms overflowed to a negative drift.
		{"drift near 1", redlock.Config{DriftFactor: math.Nextafter(1, 0)}, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Source = &counter{}
			l, err := redlock.New(cs, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			ls, err := l.TryAcquire(ctx, prefix+"edge", &distlock.Options{TTL: tc.ttl})
			if !errors.Is(err, concurkit.ErrInvalidArgument) {
				if ls != nil {
					t.Errorf("lease valid for %v", time.Until(deadline(t, ls)))
					_ = ls.Release(ctx)
				}
				t.Fatalf("TryAcquire = %v, want ErrInvalidArgument", err)
			}
		})
	}

	t.Run("TTL MaxInt64", func(t *testing.T) {
		l, err := redlock.New(cs, &redlock.Config{Source: &counter{}})
		if err != nil {
			t.Fatal(err)
		}
		key := prefix + "forever"
		ls, err := l.TryAcquire(ctx, key, &distlock.Options{TTL: math.MaxInt64})
		if err != nil {
			t.Fatalf("TryAcquire(TTL MaxInt64) = %v", err)
		}
		defer ls.Release(ctx)
		if d := time.Until(deadline(t, ls)); d < 100*365*24*time.Hour {
			t.Fatalf("validity %v, want ~290 years", d)
		}
		if err := ls.Extend(ctx, math.MaxInt64); err != nil {
			t.Fatalf("Extend(MaxInt64) = %v", err)
		}
		for _, ttl := range []time.Duration{time.Nanosecond, 2 * time.Millisecond} {
			if err := ls.Extend(ctx, ttl); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("Extend(%v) = %v, want ErrInvalidArgument", ttl, err)
			}
		}
		l.Quiesce()
		if n := holders(t, cs, key, ls.Token()); n != len(cs) {
			t.Fatalf("lock on %d masters after refused Extends", n)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}
	})

	t.Run("token MaxInt64", func(t *testing.T) {
		key := prefix + "maxtok"
		l, err := redlock.New(cs, &redlock.Config{Source: fixedSource(math.MaxInt64)})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // equal tokens are accepted
			ls, err := l.TryAcquire(ctx, key, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := ls.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if yes, stale := l.AttemptWithToken(ctx, key, time.Second, math.MaxInt64-1); yes != 0 || stale != len(cs) {
			t.Fatalf("MaxInt64-1 after MaxInt64: %d accepted, %d stale", yes, stale)
		}
	})
}
