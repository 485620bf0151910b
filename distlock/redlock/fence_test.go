package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
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

// TestFenceOutlivesExtendedLock: each master's fence record (the highest
// token that acquired a key) must live as long as the lock and FenceTTL
// after it, however often the lock is extended. Otherwise a waiter that
// minted its token before the holder acquires after it with a LOWER token
// once the holder releases.
func TestFenceOutlivesExtendedLock(t *testing.T) {
	cs, prefix := redlockEnv(t)
	src := &counter{}
	cfg := &redlock.Config{Source: src, FenceTTL: time.Millisecond} // the shortest a Config allows
	ctx := t.Context()
	key := prefix + "k"
	old, _ := src.Next(ctx) // A mints its token, then stalls

	holder, err := redlock.New(cs, cfg)
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
	holder.Quiesce() // every master answered
	for i, c := range cs {
		// The fence first: read later, the lock's PTTL can only be lower.
		fenceTTL := c.PTTL(ctx, redlock.FenceKey(key)).Val()
		lockTTL := c.PTTL(ctx, redlock.LockKey(key)).Val()
		if fenceTTL < lockTTL {
			t.Errorf("master %d after Extend(10s): fence record PTTL %v < lock PTTL %v", i, fenceTTL, lockTTL)
		}
	}
	// Time passing is what is tested: B holds the lock (extended) past
	// the expiry its fence records had at acquisition.
	time.Sleep(time.Until(acquired.Add(ttl + 500*time.Millisecond)))
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}

	waiter, err := redlock.New(cs, &redlock.Config{Source: &replay{first: []fenced.Token{old}, next: src}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := waiter.Acquire(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	if a.Token() <= b.Token() {
		t.Fatalf("A acquired with token %v after B held token %v: the fence records expired while B held the lock", a.Token(), b.Token())
	}
}
