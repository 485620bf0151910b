package redisnode

import (
	"context"
	"errors"
	"math"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/testkit"
)

// TestScripts checks the scripts' answers on the shared server, request by
// request, in the orders a client retry or a late request produces.
func TestScripts(t *testing.T) {
	c, prefix := testkit.Redis(t)
	s := NewScripts()
	ctx := t.Context()
	const ttl, fenceTTL = 10 * time.Second, time.Minute
	n := 0
	fresh := func() Keys {
		n++
		k := NewKeys(prefix + string(rune('a'+n)))
		t.Cleanup(func() { _ = c.Del(context.Background(), k.Lock(), k.Fence()).Err() })
		return k
	}
	acquire := func(k Keys, value string, tok fenced.Token) int64 {
		t.Helper()
		res, err := s.Acquire(ctx, c, k, value, ttl, tok, fenceTTL)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	expect := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Fatalf("%s = %d, want %d", what, got, want)
		}
	}
	call := func(res int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	fence := func(k Keys) string {
		t.Helper()
		v, err := c.Get(ctx, k.Fence()).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			t.Fatal(err)
		}
		return v
	}

	t.Run("acquire is idempotent", func(t *testing.T) {
		k := fresh()
		expect("acquire", acquire(k, "5:a", 5), Acquired)
		if err := c.PExpire(ctx, k.Lock(), time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		expect("the same request again (a client retry)", acquire(k, "5:a", 5), Acquired)
		if pttl := c.PTTL(ctx, k.Lock()).Val(); pttl < ttl-time.Second {
			t.Fatalf("PTTL after the retry %v, want the expiry reset to %v", pttl, ttl)
		}
		expect("another value, same token", acquire(k, "5:b", 5), Busy)
		expect("another value, higher token", acquire(k, "6:c", 6), Busy)
		expect("another value, lower token", acquire(k, "4:d", 4), Stale)
	})

	t.Run("release is idempotent", func(t *testing.T) {
		k := fresh()
		expect("acquire", acquire(k, "5:a", 5), Acquired)
		expect("release", call(s.Release(ctx, c, k, "5:a")), 1)
		expect("the same request again (a client retry)", call(s.Release(ctx, c, k, "5:a")), 1)
		expect("a later holder", acquire(k, "6:b", 6), Acquired)
		expect("release while another holds the lock", call(s.Release(ctx, c, k, "5:a")), 0)
		expect("the later holder's release", call(s.Release(ctx, c, k, "6:b")), 1)
		expect("release after another held the lock", call(s.Release(ctx, c, k, "5:a")), 0)
	})

	t.Run("release on a server that lost its data", func(t *testing.T) {
		k := fresh()
		expect("acquire", acquire(k, "5:a", 5), Acquired)
		if err := c.Del(ctx, k.Lock(), k.Fence()).Err(); err != nil { // a restart without persistence
			t.Fatal(err)
		}
		expect("release", call(s.Release(ctx, c, k, "5:a")), Emptied)
	})

	// The two orders in which an abandoned SET and its retirement can run
	// on the server: in both, the lock does not stay.
	t.Run("retire before the SET", func(t *testing.T) {
		k := fresh()
		expect("retire", call(s.Retire(ctx, c, k, "5:a", 5, ttl, fenceTTL)), 0)
		expect("the late SET", acquire(k, "5:a", 5), Stale)
		if n := c.Exists(ctx, k.Lock()).Val(); n != 0 {
			t.Fatal("the late SET took the lock")
		}
		expect("a later token", acquire(k, "6:b", 6), Acquired)
	})
	t.Run("SET before retire", func(t *testing.T) {
		k := fresh()
		expect("the SET", acquire(k, "5:a", 5), Acquired)
		expect("retire", call(s.Retire(ctx, c, k, "5:a", 5, ttl, fenceTTL)), 1)
		expect("a duplicate of the SET (another try of the client)", acquire(k, "5:a", 5), Stale)
		if n := c.Exists(ctx, k.Lock()).Val(); n != 0 {
			t.Fatal("the duplicate SET took the lock")
		}
	})
	t.Run("retire spares another holder", func(t *testing.T) {
		k := fresh()
		expect("holder", acquire(k, "7:h", 7), Acquired)
		expect("retire a lower token", call(s.Retire(ctx, c, k, "5:a", 5, ttl, fenceTTL)), 0)
		if f := fence(k); f != "7" {
			t.Fatalf("fence %q after retiring 5 under holder 7, want 7 (never lowered)", f)
		}
		expect("holder extends", call(s.Extend(ctx, c, k, "7:h", ttl, fenceTTL)), 1)
		expect("holder releases", call(s.Release(ctx, c, k, "7:h")), 1)
	})
	t.Run("retire the largest token", func(t *testing.T) {
		k := fresh()
		expect("retire MaxInt64", call(s.Retire(ctx, c, k, "x", math.MaxInt64, ttl, fenceTTL)), 0)
		if f := fence(k); f != "9223372036854775808" {
			t.Fatalf("fence %q, want MaxInt64+1", f)
		}
		expect("the late SET", acquire(k, "x", math.MaxInt64), Stale)
	})

	t.Run("extend keeps the fence record alive", func(t *testing.T) {
		k := fresh()
		if res := call(s.Acquire(ctx, c, k, "5:a", time.Second, 5, time.Millisecond)); res != Acquired {
			t.Fatal(res)
		}
		expect("extend", call(s.Extend(ctx, c, k, "5:a", time.Hour, time.Millisecond)), 1)
		// The fence first: read later, the lock's PTTL can only be lower.
		if f, l := c.PTTL(ctx, k.Fence()).Val(), c.PTTL(ctx, k.Lock()).Val(); f < l {
			t.Fatalf("fence PTTL %v < lock PTTL %v after Extend", f, l)
		}
		// A lost fence record (a restart without persistence) is
		// recorded again with the holder's token.
		if err := c.Del(ctx, k.Fence()).Err(); err != nil {
			t.Fatal(err)
		}
		expect("extend", call(s.Extend(ctx, c, k, "5:a", time.Hour, time.Millisecond)), 1)
		if f := fence(k); f != "5" {
			t.Fatalf("fence %q after Extend with the record lost, want 5", f)
		}
		expect("extend another value", call(s.Extend(ctx, c, k, "5:b", time.Hour, time.Millisecond)), 0)
	})
}

func TestFenceMillis(t *testing.T) {
	for _, tc := range []struct {
		ttl, fence time.Duration
		want       int64
	}{
		{10 * time.Second, 24 * time.Hour, 86_410_000},
		{time.Millisecond + 1, 1, 3},
		{math.MaxInt64, 1, Millis(math.MaxInt64)},
		{math.MaxInt64, math.MaxInt64, Millis(math.MaxInt64)},
	} {
		if got := fenceMillis(tc.ttl, tc.fence); got != tc.want {
			t.Errorf("fenceMillis(%v, %v) = %d, want %d", tc.ttl, tc.fence, got, tc.want)
		}
	}
}

func TestPersist(t *testing.T) {
	ctx := t.Context()
	timeout := errors.New("i/o timeout")
	tries := 0
	res, err := Persist(ctx, time.Now().Add(10*time.Second), func(context.Context) (int64, error) {
		tries++
		if tries < 3 {
			return 0, timeout
		}
		return 1, nil
	})
	if res != 1 || err != nil || tries != 3 {
		t.Fatalf("Persist = %d, %v after %d tries; want 1, nil after 3", res, err, tries)
	}
	// Until bounds it; each try gets a context that ends there.
	until := time.Now().Add(300 * time.Millisecond)
	_, err = Persist(ctx, until, func(ctx context.Context) (int64, error) {
		if d, ok := ctx.Deadline(); !ok || d.After(until) {
			t.Errorf("try's deadline %v, %v; want %v", d, ok, until)
		}
		return 0, timeout
	})
	if !errors.Is(err, timeout) || time.Now().After(until.Add(5*time.Second)) {
		t.Fatalf("Persist past until = %v", err)
	}
	// A definitive failure is not retried.
	for _, def := range []error{goredis.ErrClosed, &goredisError{}, syscall.ECONNREFUSED} {
		tries = 0
		_, err := Persist(ctx, time.Now().Add(10*time.Second), func(context.Context) (int64, error) { tries++; return 0, def })
		if !errors.Is(err, def) || tries != 1 {
			t.Errorf("%v: %d tries, %v", def, tries, err)
		}
	}
}

// goredisError is an error reply of the server.
type goredisError struct{}

func (*goredisError) Error() string { return "ERR script" }
func (*goredisError) RedisError()   {}
