package redislock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
)

// replay mints the tokens in first, then continues from next.
type replay struct {
	mu    sync.Mutex
	first []fenced.Token
	next  fenced.Source
}

func (r *replay) Next(ctx context.Context) (fenced.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.first) > 0 {
		t := r.first[0]
		r.first = r.first[1:]
		return t, nil
	}
	return r.next.Next(ctx)
}

// TestFenceOutlivesExtendedLock: the fence record (the highest token that
// acquired a key) must live as long as the lock and FenceTTL after it,
// however often the lock is extended. Otherwise a waiter that minted its
// token before the holder acquires after it with a LOWER token once the
// holder releases: tokens no longer increase in acquisition order. (A
// held the old token 1 and acquired after B held token 2.)
func TestFenceOutlivesExtendedLock(t *testing.T) {
	c, prefix := redisEnv(t)
	src := &counter{}
	// The shortest fence record a Config allows.
	cfg := &redislock.Config{Source: src, FenceTTL: time.Millisecond}
	ctx := t.Context()
	key := prefix + "k"
	old, _ := src.Next(ctx) // A mints its token, then stalls

	holder, err := redislock.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Second
	acquired := time.Now()
	b, err := holder.Acquire(ctx, key, &distlock.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The fence first: read later, the lock's PTTL can only be lower.
	fenceTTL := c.PTTL(ctx, redislock.FenceKey(key)).Val()
	lockTTL := c.PTTL(ctx, redislock.LockKey(key)).Val()
	if fenceTTL < lockTTL {
		t.Errorf("after Extend(10s): fence record PTTL %v < lock PTTL %v", fenceTTL, lockTTL)
	}
	// Time passing is what is tested: B holds the lock (extended) past
	// the expiry its fence record had at acquisition.
	time.Sleep(time.Until(acquired.Add(ttl + 500*time.Millisecond)))
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A resumes with its old token.
	waiter, err := redislock.New(c, &redislock.Config{Source: &replay{first: []fenced.Token{old}, next: src}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := waiter.Acquire(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	if a.Token() <= b.Token() {
		t.Fatalf("A acquired with token %v after B held token %v: the fence record expired while B held the lock", a.Token(), b.Token())
	}
}
