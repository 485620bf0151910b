package redlock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

func TestMain(m *testing.M) {
	// The fault test dials killed masters; go-redis would log every failed dial.
	goredis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

type counter struct{ n atomic.Int64 }

func (c *counter) Next(context.Context) (fenced.Token, error) { return fenced.Token(c.n.Add(1)), nil }

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

func newLocker(t testing.TB) (*redlock.Locker, []*goredis.Client, string) {
	t.Helper()
	cs, prefix := redlockEnv(t)
	_, src := tokenSource(t)
	l, err := redlock.New(cs, &redlock.Config{Source: src})
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
	return l, cs, prefix
}

func TestNewBadInput(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	var nilClient *goredis.Client
	var nilSrc *fencedpg.Sequence
	ok := []*goredis.Client{c, c, c}
	src := &counter{}
	for _, tc := range []struct {
		name  string
		nodes []*goredis.Client
		cfg   *redlock.Config
	}{
		{"no nodes", nil, &redlock.Config{Source: src}},
		{"empty node list", []*goredis.Client{}, &redlock.Config{Source: src}},
		{"nil node", []*goredis.Client{c, nilClient, c}, &redlock.Config{Source: src}},
		{"nil config (Source is required)", ok, nil},
		{"nil source", ok, &redlock.Config{}},
		{"typed nil source", ok, &redlock.Config{Source: nilSrc}},
		{"negative node timeout", ok, &redlock.Config{Source: src, NodeTimeout: -time.Millisecond}},
		{"negative drift factor", ok, &redlock.Config{Source: src, DriftFactor: -0.1}},
		{"drift factor 1", ok, &redlock.Config{Source: src, DriftFactor: 1}},
		{"drift factor NaN", ok, &redlock.Config{Source: src, DriftFactor: math.NaN()}},
		{"negative margin", ok, &redlock.Config{Source: src, Margin: -1}},
		{"negative poll", ok, &redlock.Config{Source: src, PollMin: -1}},
		{"negative fence TTL", ok, &redlock.Config{Source: src, FenceTTL: -1}},
		{"negative cleanup timeout", ok, &redlock.Config{Source: src, CleanupTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redlock.New(tc.nodes, tc.cfg)
			if !errors.Is(err, concurkit.ErrInvalidArgument) || l != nil {
				t.Fatalf("New = %v, %v; want nil, an error matching concurkit.ErrInvalidArgument", l, err)
			}
		})
	}
	// A nil or zero Locker is bad input too, not a panic.
	for name, l := range map[string]*redlock.Locker{"nil": nil, "zero": new(redlock.Locker)} {
		if _, err := l.Acquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: Acquire = %v", name, err)
		}
		if _, err := l.TryAcquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: TryAcquire = %v", name, err)
		}
	}
	l, err := redlock.New(ok, &redlock.Config{Source: &counter{}})
	if err != nil || l.Quorum() != 2 {
		t.Fatalf("New(3 nodes) = %v, %v; want quorum 2", l, err)
	}
}

func TestAcquireBadInput(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = c.Close() })
	l, err := redlock.New([]*goredis.Client{c}, &redlock.Config{Source: &counter{}})
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

// holders counts the masters whose lock value carries tok.
func holders(t testing.TB, cs []*goredis.Client, key string, tok fenced.Token) int {
	t.Helper()
	n := 0
	for _, c := range cs {
		if v, _ := c.Get(context.Background(), redlock.LockKey(key)).Result(); strings.HasPrefix(v, tok.String()+":") {
			n++
		}
	}
	return n
}

func TestAcquireExtendRelease(t *testing.T) {
	l, cs, prefix := newLocker(t)
	ctx := t.Context()
	key := prefix + "order-1"
	opts := &distlock.Options{TTL: 2 * time.Second}
	ls, err := l.Acquire(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := holders(t, cs, key, ls.Token()); n < l.Quorum() { // decided at quorum
		t.Fatalf("lock on %d masters, want ≥ %d", n, l.Quorum())
	}
	if _, err := l.TryAcquire(ctx, key, opts); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire on held key = %v, want ErrNotAcquired", err)
	}
	if holders(t, cs, key, ls.Token()) < l.Quorum() {
		t.Fatal("failed TryAcquire removed the holder's lock")
	}
	if err := ls.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	l.Quiesce() // Extend returns at quorum; the other masters follow
	// Only a majority is promised: on a loaded machine a master may answer
	// the acquisition or the extension after NodeTimeout (it is then
	// cleaned up, or keeps the shorter TTL), which costs nothing as long as
	// a majority holds the extended lock.
	extended := 0
	for _, c := range cs {
		if pttl := c.PTTL(ctx, redlock.LockKey(key)).Val(); pttl > 2*time.Second {
			extended++
		}
	}
	if extended < l.Quorum() {
		t.Fatalf("lock extended on %d masters, want ≥ %d", extended, l.Quorum())
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	if ls.Context().Err() == nil {
		t.Fatal("lease context alive after Release")
	}
	l.Quiesce()
	if n := holders(t, cs, key, ls.Token()); n != 0 {
		t.Fatalf("lock left on %d masters after Release", n)
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

func TestExpiredLeaseSparesSuccessor(t *testing.T) {
	l, cs, prefix := newLocker(t)
	ctx := t.Context()
	key := prefix + "k"
	a, err := l.Acquire(ctx, key, &distlock.Options{TTL: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done()
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
	l.Quiesce() // every delete A's Release sent has run
	if n := holders(t, cs, key, b.Token()); n < l.Quorum() {
		t.Fatalf("successor's lock on %d masters after the old lease's Release", n)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireCancelWhileWaiting(t *testing.T) {
	cs, prefix := redlockEnv(t)
	_, pg := tokenSource(t)
	src := &signalSource{Source: pg, started: make(chan struct{})}
	l, err := redlock.New(cs, &redlock.Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	other, err := redlock.New(cs, &redlock.Config{Source: pg})
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + "k"
	held, err := other.Acquire(t.Context(), key, &distlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	other.Quiesce() // decided at quorum; the other masters follow
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
	l.Quiesce()
	if n := holders(t, cs, key, held.Token()); n != len(cs) {
		t.Fatalf("holder's lock on %d masters after a cancelled waiter", n)
	}
}

// A token lower than one that acquired the key cannot gather a majority,
// even on a free lock: any two majorities share a master that remembers
// the higher token.
func TestStaleTokenRefused(t *testing.T) {
	cs, prefix := redlockEnv(t)
	src := &counter{}
	l, err := redlock.New(cs, &redlock.Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	key := prefix + "k"
	old, _ := src.Next(ctx)
	ls, err := l.Acquire(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	yes, stale := l.AttemptWithToken(ctx, key, time.Second, old)
	if yes >= l.Quorum() || stale < l.Quorum() {
		t.Fatalf("older token on a free lock: %d accepted, %d stale; want a stale majority", yes, stale)
	}
}

// A user key that equals another key plus ":fence" is a lock of its own
// (see the redis package's test of the same name).
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
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
