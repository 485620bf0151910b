package ratelimitredis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitredis"
	"github.com/concurkit/concurkit/ratelimit/ratelimittest"
)

// checkThenIncrement is the limiter the Lua script exists to avoid: it
// reads the count, decides in Go, then increments, in two round trips.
// Its first call waits at gate (if not nil) between the read and the
// write, so that every client reads before any writes.
type checkThenIncrement struct {
	c    *goredis.Client
	gate *sync.WaitGroup
	once sync.Once
}

func (l *checkThenIncrement) AllowN(ctx context.Context, key string, limit ratelimit.Limit, n int64) (ratelimit.Decision, error) {
	k := ratelimitredis.WindowKey(key)
	used, err := l.c.HGet(ctx, k, "c").Int64()
	if err != nil && err != goredis.Nil {
		return ratelimit.Decision{}, err
	}
	if l.gate != nil {
		l.once.Do(func() { l.gate.Done(); l.gate.Wait() })
	}
	if used+n > limit.Rate {
		return ratelimit.Decision{Limit: limit, RetryAfter: time.Second}, nil
	}
	used, err = l.c.HIncrBy(ctx, k, "c", n).Result()
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return ratelimit.Decision{Allowed: true, Limit: limit, Remaining: limit.Rate - used}, nil
}

// TestNegativeControl: the exactness check of the suite (Hit) catches a
// check-then-increment limiter: ten clients that all read before any
// writes admit ten requests against a limit of five. The script limiter,
// run the same way, admits five.
func TestNegativeControl(t *testing.T) {
	const clients = 10
	limit := ratelimit.Limit{Rate: 5, Period: time.Hour}
	var gate sync.WaitGroup
	gate.Add(clients)
	naive := make([]ratelimit.Limiter, clients)
	atomic := make([]ratelimit.Limiter, clients)
	for i := range naive {
		c := client(t)
		naive[i] = &checkThenIncrement{c: c, gate: &gate}
		atomic[i] = newLimiter(t, c, ratelimit.FixedWindow, nil)
	}
	b := ratelimittest.Hit(t, naive, ratelimittest.Key(t), limit, 3)
	t.Logf("check-then-increment: %d allowed of limit %d", b.Allowed, limit.Rate)
	if b.Allowed < clients {
		t.Fatalf("check-then-increment admitted %d, want at least the %d first calls (the race this control forces)", b.Allowed, clients)
	}
	if b := ratelimittest.Hit(t, atomic, ratelimittest.Key(t), limit, 3); int64(b.Allowed) != limit.Rate {
		t.Fatalf("script limiter admitted %d, want %d", b.Allowed, limit.Rate)
	}
}
