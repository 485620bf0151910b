package redislock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/redisnode/redisnodetest"
	"github.com/concurkit/concurkit/distlock/redislock"
)

// proxied returns a Locker whose client reaches the shared server through
// a proxy that can lose answers, a direct client for inspection and a key
// prefix. The scripts are loaded first (one acquisition and release
// through the proxy), so that the call whose answer is lost is an EVALSHA
// that runs, not one answered NOSCRIPT.
func proxied(t *testing.T, opts goredis.Options) (*redislock.Locker, *redisnodetest.Proxy, *goredis.Client, string) {
	t.Helper()
	direct, prefix := redisEnv(t)
	p := redisnodetest.NewProxy(t, direct.Options().Addr)
	opts.Addr = p.Addr
	c := goredis.NewClient(&opts)
	t.Cleanup(func() { _ = c.Close() })
	l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := l.TryAcquire(t.Context(), prefix+"warm-up", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Extend(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l, p, direct, prefix
}

// lost fails the test unless the proxy lost an answer: without the fault
// the test proves nothing.
func lost(t *testing.T, p *redisnodetest.Proxy) {
	t.Helper()
	select {
	case <-p.Lost():
	default:
		t.Fatal("no answer was lost: the fault was not injected")
	}
}

// clientRetryOptions are the client options of the retry tests: go-redis's
// defaults (ReadTimeout 5 s, MaxRetries 3), and the same with a short
// ReadTimeout so that the retry comes quickly.
var clientRetryOptions = []struct {
	name string
	opts goredis.Options
}{
	{"ReadTimeout 200ms", goredis.Options{ReadTimeout: 200 * time.Millisecond}},
	{"default options", goredis.Options{}},
}

// TestClientRetryAcquire: the server applies the acquire script but its
// answer is lost; go-redis retries the call on a fresh connection (its
// default MaxRetries is 3), and the retry finds the lock holding the
// value of this very acquisition. That is our lock, not a busy one: the
// acquisition succeeds with the lock's expiry reset, instead of reporting
// "not acquired" and leaving the key locked, by nobody, for the TTL.
func TestClientRetryAcquire(t *testing.T) {
	for _, tc := range clientRetryOptions {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, p, direct, prefix := proxied(t, tc.opts)
			ctx := t.Context()
			key := prefix + "k"
			p.LoseAnswers(1)
			start := time.Now()
			ls, err := l.TryAcquire(ctx, key, &distlock.Options{TTL: 20 * time.Second})
			took := time.Since(start)
			lost(t, p)
			v, _ := direct.Get(ctx, redislock.LockKey(key)).Result()
			pttl := direct.PTTL(ctx, redislock.LockKey(key)).Val()
			if err != nil {
				t.Fatalf("TryAcquire whose first answer was lost (the client retried; %v) = %v; the key holds %q with PTTL %v",
					took.Round(time.Millisecond), err, v, pttl)
			}
			if !strings.HasPrefix(v, ls.Token().String()+":") {
				t.Fatalf("lock value %q, lease token %v", v, ls.Token())
			}
			if pttl < 15*time.Second {
				t.Errorf("PTTL %v after the retry, want the expiry reset (TTL 20s)", pttl)
			}
			if err := ls.Release(ctx); err != nil {
				t.Fatalf("Release = %v", err)
			}
			if n := direct.Exists(ctx, redislock.LockKey(key)).Val(); n != 0 {
				t.Fatal("lock key still there after Release")
			}
		})
	}
}

// TestClientRetryRelease: the server applies the compare-and-delete of
// Release but its answer is lost; go-redis retries, and the retry finds
// the key gone, deleted by the first try. Release must report success,
// not distlock.ErrLeaseLost: nobody acquired the key after this lease
// (its fence record still holds this lease's token).
func TestClientRetryRelease(t *testing.T) {
	// The retry must come within CleanupTimeout (1 s), which bounds
	// Release: a short ReadTimeout.
	l, p, direct, prefix := proxied(t, goredis.Options{ReadTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	key := prefix + "k"
	ls, err := l.TryAcquire(ctx, key, &distlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.LoseAnswers(1)
	err = ls.Release(ctx)
	lost(t, p)
	if err != nil {
		t.Fatalf("Release whose first answer was lost (the client retried) = %v, want nil", err)
	}
	if n := direct.Exists(ctx, redislock.LockKey(key)).Val(); n != 0 {
		t.Fatal("lock key still there after Release")
	}

	// A lock that vanished (an operator's DEL) while nobody acquired the
	// key after it: nobody else held it, so it counts as released.
	a, err := l.TryAcquire(ctx, key, &distlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Del(ctx, redislock.LockKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release of a lease whose lock vanished, nobody acquiring since = %v, want nil", err)
	}

	// A lease whose lock another holder took meanwhile is reported lost.
	a, err = l.TryAcquire(ctx, key, &distlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Del(ctx, redislock.LockKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := l.TryAcquire(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release of a lease whose lock another holder took since = %v, want ErrLeaseLost", err)
	}
}
