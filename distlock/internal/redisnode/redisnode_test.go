package redisnode

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestKeysInjective(t *testing.T) {
	keys := []string{
		"x", "x:fence", "x:lock", "x}:fence", "x}:lock", "{x}", "{x", "x}", "%7Bx%7D", "%7Bx}", "{x%7D",
		"%", "%25", "%2525", "}", "{", "}{", "{}", "a", "a}", "ck:{a}:lock", "ck:{a}:fence", ":fence", ":lock",
	}
	seen := map[string]string{}
	for _, k := range keys {
		for _, rk := range []string{LockKey(k), FenceKey(k)} {
			if other, dup := seen[rk]; dup {
				t.Fatalf("user keys %q and %q both map to Redis key %q", other, k, rk)
			}
			seen[rk] = k
			// The hash tag is everything between the first '{' and the
			// first '}' after it: it must be the same for both keys of k.
			open := strings.IndexByte(rk, '{')
			end := strings.IndexByte(rk[open+1:], '}') + open + 1
			if tag := rk[open+1 : end]; tag != escape(k) || tag == "" {
				t.Fatalf("%q: hash tag of %q is %q, want %q", k, rk, tag, escape(k))
			}
		}
		if nk := NewKeys(k); nk.Lock() != LockKey(k) || nk.both[1] != FenceKey(k) {
			t.Fatalf("NewKeys(%q) = %v", k, nk.both)
		}
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Millisecond - 1, -1}, // callers reject ≤ 0 before
		{-1, 0},
		{0, 0},
		{1, 1}, // sub-millisecond rounds UP: the server never holds less than the client counts
		{time.Millisecond - 1, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Microsecond, 2},
		{10 * time.Second, 10000},
		{math.MaxInt64, 9223372036855}, // no overflow (d + 999999 ns would wrap)
	} {
		if got := Millis(tc.d); got != tc.want {
			t.Errorf("Millis(%d) = %d, want %d", int64(tc.d), got, tc.want)
		}
	}
}

func TestNoValidity(t *testing.T) {
	const max = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		ttl, drift, margin time.Duration
		want               bool
	}{
		{10 * time.Second, 102 * time.Millisecond, time.Second, false},
		{time.Second, time.Second, 0, true},
		{0, 0, 0, true},
		{time.Millisecond, 2 * time.Millisecond, max, true}, // ttl-drift-margin overflows to > 0 with plain arithmetic
		{max, max / 100, max, true},
		{max, max, 0, true},
		{max, 0, max - 1, false},
		{time.Second, -1, -1, false},
	} {
		if got := NoValidity(tc.ttl, tc.drift, tc.margin); got != tc.want {
			t.Errorf("NoValidity(%v, %v, %v) = %v, want %v", tc.ttl, tc.drift, tc.margin, got, tc.want)
		}
	}
}

func TestRequest(t *testing.T) {
	var bg Background
	release := make(chan struct{})
	slow := func(context.Context) (int64, error) { <-release; return 1, nil }
	orphaned := make(chan int64, 1)
	orphan := func(n int64, err error) { orphaned <- n }

	// A client that ignores deadlines: Request returns at ctx's deadline,
	// and the late answer goes to orphan once the call returns.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	n, err, abandoned := Request(ctx, ctx, false, &bg, slow, orphan)
	if !abandoned || !errors.Is(err, context.DeadlineExceeded) || n != 0 {
		t.Fatalf("Request = %d, %v, %v; want abandoned at the deadline", n, err, abandoned)
	}
	close(release)
	if n := <-orphaned; n != 1 {
		t.Fatalf("orphan got %d", n)
	}
	_ = bg.Wait(context.Background())

	// reqCtx ending first also ends the wait.
	block := make(chan struct{})
	rctx, rcancel := context.WithCancel(context.Background())
	rcancel()
	_, err, abandoned = Request(t.Context(), rctx, false, &bg, func(context.Context) (int64, error) { <-block; return 0, nil }, nil)
	if !abandoned || !errors.Is(err, context.Canceled) {
		t.Fatalf("Request with reqCtx done = %v, %v", err, abandoned)
	}
	close(block)
	_ = bg.Wait(context.Background())

	// A client that honours deadlines still ignores cancellation: a
	// cancellable ctx (with a deadline or not) never runs the call on the
	// caller's goroutine, so cancelling it ends the wait at once.
	cctx, ccancel := context.WithTimeout(t.Context(), time.Hour)
	ccancel()
	block = make(chan struct{})
	_, err, abandoned = Request(cctx, cctx, true, &bg, func(context.Context) (int64, error) { <-block; return 0, nil }, nil)
	if !abandoned || !errors.Is(err, context.Canceled) {
		t.Fatalf("Request with a cancelled ctx, honours = %v, %v", err, abandoned)
	}
	close(block)
	_ = bg.Wait(context.Background())

	// Fast paths: no goroutine when nobody can stop waiting before the
	// client returns by itself; the call runs on the caller's goroutine.
	onCaller := func(context.Context) (int64, error) { return 7, nil }
	bounded, bcancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Second)
	defer bcancel()
	for _, tc := range []struct {
		name        string
		ctx, reqCtx context.Context
		honours     bool
	}{
		{"background", context.Background(), context.Background(), false},
		{"honours, detached request with a deadline", context.Background(), bounded, true},
	} {
		if n, err, abandoned := Request(tc.ctx, tc.reqCtx, tc.honours, nil, onCaller, nil); n != 7 || err != nil || abandoned {
			t.Fatalf("%s: %d, %v, %v", tc.name, n, err, abandoned)
		}
	}
}
