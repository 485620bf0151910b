package ratelimitredis_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitredis"
	"github.com/concurkit/concurkit/ratelimit/ratelimittest"
	"github.com/concurkit/concurkit/testkit"
)

// client returns a new client of the shared Redis server (its own
// connection pool, as another server would have); the keys of the test
// ("ck:{<test name>…") are deleted at cleanup.
func client(t testing.TB) *goredis.Client {
	t.Helper()
	c := testkit.RedisClient(t, testkit.RedisAddr(t), "")
	root := strings.SplitN(t.Name(), "/", 2)[0]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, "ck:{"+root+":*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = c.Unlink(ctx, iter.Val()).Err()
		}
	})
	return c
}

func newLimiter(t testing.TB, c goredis.Scripter, a ratelimit.Algorithm, now func() time.Time) *ratelimitredis.Limiter {
	t.Helper()
	l, err := ratelimitredis.New(c, &ratelimitredis.Config{Algorithm: a, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSuite runs the conformance suite: each limiter on a client of its
// own.
func TestSuite(t *testing.T) {
	ratelimittest.Run(t, func(t *testing.T, a ratelimit.Algorithm, now func() time.Time) ratelimit.Limiter {
		return newLimiter(t, client(t), a, now)
	}, nil)
}

func TestKeys(t *testing.T) {
	for key, want := range map[string][2]string{
		"user:42": {"ck:{user:42}:rl", "ck:{user:42}:gcra"},
		"a}b{c%":  {"ck:{a%7Db%7Bc%25}:rl", "ck:{a%7Db%7Bc%25}:gcra"},
	} {
		if got := ratelimitredis.WindowKey(key); got != want[0] {
			t.Errorf("WindowKey(%q) = %q, want %q", key, got, want[0])
		}
		if got := ratelimitredis.GCRAKey(key); got != want[1] {
			t.Errorf("GCRAKey(%q) = %q, want %q", key, got, want[1])
		}
	}
}

// TestStoredState: the keys hold what the package doc says, with a TTL.
func TestStoredState(t *testing.T) {
	c := client(t)
	ctx := t.Context()
	clock := ratelimittest.NewClock(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC))
	key := ratelimittest.Key(t)
	limit := ratelimit.Limit{Rate: 10, Period: time.Minute}

	w := newLimiter(t, c, ratelimit.FixedWindow, clock.Now)
	if _, err := w.AllowN(ctx, key, limit, 3); err != nil {
		t.Fatal(err)
	}
	h, err := c.HGetAll(ctx, ratelimitredis.WindowKey(key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC).UnixMicro()
	if h["c"] != "3" || h["e"] != itoa(end) {
		t.Fatalf("window state %v, want c=3 e=%d", h, end)
	}
	// TTL: 30 s left in the window + one period + 1 s.
	if ttl := c.PTTL(ctx, ratelimitredis.WindowKey(key)).Val(); ttl <= 90*time.Second || ttl > 91*time.Second {
		t.Fatalf("window TTL %v, want (90 s, 91 s]", ttl)
	}

	g := newLimiter(t, c, ratelimit.GCRA, clock.Now)
	if _, err := g.AllowN(ctx, key, limit, 2); err != nil { // T = 6 s
		t.Fatal(err)
	}
	tat := clock.Now().Add(12 * time.Second).UnixMicro()
	if v := c.Get(ctx, ratelimitredis.GCRAKey(key)).Val(); v != itoa(tat) {
		t.Fatalf("GCRA state %q, want %d", v, tat)
	}
	if ttl := c.PTTL(ctx, ratelimitredis.GCRAKey(key)).Val(); ttl <= 12*time.Second || ttl > 13*time.Second {
		t.Fatalf("GCRA TTL %v, want (12 s, 13 s]", ttl)
	}

	// Reset forgets both.
	if err := g.Reset(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, ratelimitredis.WindowKey(key), ratelimitredis.GCRAKey(key)).Val(); n != 0 {
		t.Fatalf("%d keys left after Reset", n)
	}
	if d, err := w.AllowN(ctx, key, limit, 10); err != nil || !d.Allowed {
		t.Fatalf("after Reset: %+v, %v", d, err)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestNew(t *testing.T) {
	var nilClient *goredis.Client
	for name, c := range map[string]goredis.Scripter{"nil": nil, "typed nil": nilClient} {
		if _, err := ratelimitredis.New(c, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%s client): %v", name, err)
		}
	}
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := ratelimitredis.New(c, &ratelimitredis.Config{Algorithm: 7}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("unknown algorithm: %v", err)
	}
	var zero *ratelimitredis.Limiter
	if _, err := zero.Allow(t.Context(), "k", ratelimit.Limit{Rate: 1, Period: time.Second}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil Limiter: %v", err)
	}
	if err := (&ratelimitredis.Limiter{}).Reset(t.Context(), "k"); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("zero Limiter Reset: %v", err)
	}
	l, err := ratelimitredis.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(t.Context(), ""); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Reset of an empty key: %v", err)
	}
}

// TestFrozenServer: a hung Redis (SIGSTOP) does not hang the middleware:
// fail-closed answers 503 and fail-open lets the request through, both by
// the middleware's Timeout. Scripts come back after the server lost them.
func TestFrozenServer(t *testing.T) {
	p := testkit.StartRedis(t, 1)[0]
	c := testkit.RedisClient(t, p.Addr, "")
	l := newLimiter(t, c, ratelimit.GCRA, nil)
	limit := ratelimit.Limit{Rate: 100, Period: time.Second}

	// EVALSHA falls back to EVAL when the server does not know the script.
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(t.Context(), "k", limit); err != nil || !d.Allowed {
		t.Fatalf("after SCRIPT FLUSH: %+v, %v", d, err)
	}

	const timeout = 200 * time.Millisecond
	var mu sync.Mutex
	var errs []error
	handler := func(failOpen bool) http.Handler {
		mw, err := ratelimit.Middleware(l, &ratelimit.Config{Limit: limit, Timeout: timeout, FailOpen: failOpen,
			OnError: func(_ *http.Request, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		return mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	}
	p.Freeze(t)
	for _, tc := range []struct {
		failOpen bool
		want     int
	}{{false, http.StatusServiceUnavailable}, {true, http.StatusNoContent}} {
		rec := httptest.NewRecorder()
		start := time.Now()
		handler(tc.failOpen).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		took := time.Since(start)
		t.Logf("frozen server, FailOpen %v: %d in %v (Timeout %v)", tc.failOpen, rec.Code, took, timeout)
		if rec.Code != tc.want {
			t.Errorf("FailOpen %v: status %d, want %d", tc.failOpen, rec.Code, tc.want)
		}
		if took > 5*time.Second {
			t.Errorf("FailOpen %v: took %v with a Timeout of %v", tc.failOpen, took, timeout)
		}
	}
	p.Thaw(t)
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 2 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("OnError got %v, want two errors matching context.DeadlineExceeded", errs)
	}
}
