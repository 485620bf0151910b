package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newLocker(t testing.TB) (*redislock.Locker, *goredis.Client, string) {
	t.Helper()
	c, prefix := redisEnv(t)
	_, src := tokenSource(t)
	l, err := redislock.New(c, &redislock.Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l, c, prefix
}

type counter struct{ n atomic.Int64 }

func (c *counter) Next(context.Context) (fenced.Token, error) { return fenced.Token(c.n.Add(1)), nil }

func TestNewBadInput(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	var nilClient *goredis.Client
	var nilSrc *fencedpg.Sequence
	for _, tc := range []struct {
		name   string
		client goredis.Scripter
		cfg    *redislock.Config
	}{
		{"nil client", nil, &redislock.Config{Source: &counter{}}},
		{"typed nil client", nilClient, &redislock.Config{Source: &counter{}}},
		{"nil config (Source is required)", c, nil},
		{"nil source", c, &redislock.Config{}},
		{"typed nil source", c, &redislock.Config{Source: nilSrc}},
		{"negative margin", c, &redislock.Config{Source: &counter{}, Margin: -1}},
		{"negative poll", c, &redislock.Config{Source: &counter{}, PollMax: -time.Second}},
		{"negative fence TTL", c, &redislock.Config{Source: &counter{}, FenceTTL: -1}},
		{"negative cleanup timeout", c, &redislock.Config{Source: &counter{}, CleanupTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redislock.New(tc.client, tc.cfg)
			if !errors.Is(err, concurkit.ErrInvalidArgument) || l != nil {
				t.Fatalf("New = %v, %v; want nil, an error matching concurkit.ErrInvalidArgument", l, err)
			}
		})
	}
	// A nil or zero Locker is bad input too, not a panic.
	for name, l := range map[string]*redislock.Locker{"nil": nil, "zero": new(redislock.Locker)} {
		if _, err := l.Acquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: Acquire = %v", name, err)
		}
		if _, err := l.TryAcquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: TryAcquire = %v", name, err)
		}
	}
}

func TestAcquireBadInput(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = c.Close() })
	l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  string
		opts *distlock.Options
		want error
	}{
		{"empty key", "", nil, distlock.ErrInvalidKey},
		{"negative TTL", "k", &distlock.Options{TTL: -time.Second}, concurkit.ErrInvalidArgument},
		{"TTL below 1ms", "k", &distlock.Options{TTL: time.Microsecond}, concurkit.ErrInvalidArgument},
		{"TTL without validity", "k", &distlock.Options{TTL: 2 * time.Millisecond}, concurkit.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []func(context.Context, string, *distlock.Options) (distlock.Lease, error){l.Acquire, l.TryAcquire} {
				ls, err := f(t.Context(), tc.key, tc.opts)
				if !errors.Is(err, tc.want) || ls != nil {
					t.Fatalf("= %v, %v; want %v", ls, err, tc.want)
				}
			}
		})
	}
}

func TestAcquireExtendRelease(t *testing.T) {
	l, c, prefix := newLocker(t)
	ctx := t.Context()
	key := prefix + "order-1"
	opts := &distlock.Options{TTL: 2 * time.Second}
	ls, err := l.Acquire(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Key() != key || !ls.Token().Valid() {
		t.Fatalf("lease %q token %v", ls.Key(), ls.Token())
	}
	// The value stored is "<token>:<holder id>".
	v, err := c.Get(ctx, redislock.LockKey(key)).Result()
	if err != nil || !strings.HasPrefix(v, ls.Token().String()+":") {
		t.Fatalf("lock value %q, %v; want token %v first", v, err, ls.Token())
	}
	if _, err := l.TryAcquire(ctx, key, opts); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire on held key = %v, want ErrNotAcquired", err)
	}
	if err := ls.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl := c.PTTL(ctx, redislock.LockKey(key)).Val(); pttl <= 2*time.Second {
		t.Fatalf("PTTL after Extend(5s) = %v", pttl)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	if ls.Context().Err() == nil {
		t.Fatal("lease context still alive after Release")
	}
	if n := c.Exists(ctx, redislock.LockKey(key)).Val(); n != 0 {
		t.Fatal("lock key still exists after Release")
	}
	ls2, err := l.TryAcquire(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ls2.Release(ctx)
	if ls2.Token() <= ls.Token() {
		t.Fatalf("second token %v not above first %v", ls2.Token(), ls.Token())
	}
}

// An expired lease's Release and Extend never touch the successor's lock.
func TestExpiredLeaseSparesSuccessor(t *testing.T) {
	l, c, prefix := newLocker(t)
	ctx := t.Context()
	key := prefix + "k"
	a, err := l.Acquire(ctx, key, &distlock.Options{TTL: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done() // A's validity is over (before the server's TTL)
	b, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Extend(ctx, time.Second); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Extend of expired lease = %v, want ErrLeaseLost", err)
	}
	if err := a.Release(ctx); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release of expired lease = %v, want ErrLeaseLost", err)
	}
	v, _ := c.Get(ctx, redislock.LockKey(key)).Result()
	if !strings.HasPrefix(v, b.Token().String()+":") {
		t.Fatalf("successor's lock value %q lost", v)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// signalSource reports its first Next call: Acquire has started waiting.
type signalSource struct {
	fenced.Source
	once    sync.Once
	started chan struct{}
}

func (s *signalSource) Next(ctx context.Context) (fenced.Token, error) {
	s.once.Do(func() { close(s.started) })
	return s.Source.Next(ctx)
}

// Cancelling ctx while Acquire waits returns promptly with an error
// matching both ErrNotAcquired and context.Canceled, and leaves the
// holder's lock alone.
func TestAcquireCancelWhileWaiting(t *testing.T) {
	c, prefix := redisEnv(t)
	_, pg := tokenSource(t)
	src := &signalSource{Source: pg, started: make(chan struct{})}
	l, err := redislock.New(c, &redislock.Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	other, err := redislock.New(c, &redislock.Config{Source: pg})
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + "k"
	held, err := other.Acquire(t.Context(), key, &distlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, key, nil)
		done <- err
	}()
	<-src.started // the waiter made its first attempt
	cancel()
	err = <-done
	if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel = %v", err)
	}
	if v := c.Get(t.Context(), redislock.LockKey(key)).Val(); !strings.HasPrefix(v, held.Token().String()+":") {
		t.Fatalf("holder's lock value %q after a cancelled waiter", v)
	}
}

// A token lower than the highest one that acquired the key is refused at
// acquisition ("stale", -1), even when the lock itself is free; Acquire
// then mints a fresh token, so tokens increase in acquisition order.
func TestStaleTokenRefused(t *testing.T) {
	c, prefix := redisEnv(t)
	src := &counter{}
	l, err := redislock.New(c, &redislock.Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	key := prefix + "k"
	old, _ := src.Next(ctx) // minted by a waiter that then stalls
	ls, err := l.Acquire(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := l.AttemptWithToken(ctx, key, time.Second, old)
	if err != nil || res != -1 {
		t.Fatalf("free lock, older token %v after %v acquired: %d, %v; want -1 (stale)", old, ls.Token(), res, err)
	}
	if n := c.Exists(ctx, redislock.LockKey(key)).Val(); n != 0 {
		t.Fatal("stale attempt took the lock")
	}
	next, err := l.Acquire(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if next.Token() <= ls.Token() {
		t.Fatalf("token %v after %v", next.Token(), ls.Token())
	}
}

// A user key that equals another key plus ":fence" is a lock of its own:
// with the old layout the fence record of "x" WAS the key "x:fence", so
// "x:fence" stayed busy for FenceTTL (24 h) after "x" was first locked,
// and its own acquisition would have overwritten x's highest token.
func TestKeysDoNotCollide(t *testing.T) {
	l, _, prefix := newLocker(t)
	ctx := t.Context()
	x := prefix + "x"
	a, err := l.TryAcquire(ctx, x, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := l.TryAcquire(ctx, x+":fence", nil)
	if err != nil {
		t.Fatalf("TryAcquire(%q) after %q was locked: %v", x+":fence", x, err)
	}
	defer b.Release(ctx)
	for _, k := range []string{prefix + "{x}", prefix + "%7Bx%7D", prefix + "x}:lock"} {
		ls, err := l.TryAcquire(ctx, k, nil)
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", k, err)
		}
		defer ls.Release(ctx)
	}
}
