package ratelimitredis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitredis"
)

// The examples use the Redis server of scripts/services.sh (or
// CONCURKIT_REDIS_ADDR), with fresh keys they reset afterwards. A missing
// server fails the example, never the test binary.

func exampleClient() *goredis.Client {
	addr := os.Getenv("CONCURKIT_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:16379"
	}
	return goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

// Two requests per minute for each user, with GCRA (the default): the
// third request in a row waits 30 s, the time one request takes to come
// back at that rate.
func Example() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	limiter, err := ratelimitredis.New(rdb, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	key := "user:42:" + rand.Text()
	defer limiter.Reset(ctx, key)
	perMinute := ratelimit.Limit{Rate: 2, Period: time.Minute}
	for range 3 {
		d, err := limiter.Allow(ctx, key, perMinute)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter.Round(time.Second))
	}
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 30s
}

// A fixed window of 3 requests per minute, on an injected clock: the
// quota comes back at the next whole minute.
func ExampleNew_fixedWindow() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	now := time.Date(2030, 1, 1, 12, 0, 50, 0, time.UTC)
	limiter, err := ratelimitredis.New(rdb, &ratelimitredis.Config{
		Algorithm: ratelimit.FixedWindow,
		Now:       func() time.Time { return now },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	key := "import-job:" + rand.Text()
	defer limiter.Reset(ctx, key)
	limit := ratelimit.Limit{Rate: 3, Period: time.Minute}
	d, err := limiter.AllowN(ctx, key, limit, 3) // a batch of 3 at 12:00:50
	fmt.Println(d.Allowed, d.Remaining, err)
	d, err = limiter.Allow(ctx, key, limit)
	fmt.Println(d.Allowed, d.RetryAfter, err)
	now = now.Add(10 * time.Second) // 12:01:00, a new window
	d, err = limiter.Allow(ctx, key, limit)
	fmt.Println(d.Allowed, d.Remaining, err)
	// Output:
	// true 0 <nil>
	// false 10s <nil>
	// true 2 <nil>
}

// Reset gives a key its full quota back, for example after an operator
// lifted a block.
func ExampleLimiter_Reset() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	limiter, err := ratelimitredis.New(rdb, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	key := "login:alice:" + rand.Text()
	limit := ratelimit.Limit{Rate: 1, Period: time.Hour}
	for range 2 {
		d, _ := limiter.Allow(ctx, key, limit)
		fmt.Println(d.Allowed)
	}
	if err := limiter.Reset(ctx, key); err != nil {
		fmt.Println(err)
		return
	}
	d, _ := limiter.Allow(ctx, key, limit)
	fmt.Println(d.Allowed)
	_ = limiter.Reset(ctx, key)
	// Output:
	// true
	// false
	// true
}

func ExampleWindowKey() {
	fmt.Println(ratelimitredis.WindowKey("tenant{7}"))
	fmt.Println(ratelimitredis.GCRAKey("tenant{7}"))
	// Output:
	// ck:{tenant%7B7%7D}:rl
	// ck:{tenant%7B7%7D}:gcra
}
