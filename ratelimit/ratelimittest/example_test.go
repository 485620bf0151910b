package ratelimittest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitredis"
	"github.com/concurkit/concurkit/ratelimit/ratelimittest"
)

// Run checks a Limiter of your own against the contract the built-in
// stores pass. The Factory gives every call a limiter on a client of its
// own, as another server would have (here ratelimitredis; the Redis
// address is an assumption of the sketch). Shown as the test function you
// would write; it needs servers, so the Example only compiles it.
func ExampleRun() {
	_ = func(t *testing.T) {
		ratelimittest.Run(t, func(t *testing.T, a ratelimit.Algorithm, now func() time.Time) ratelimit.Limiter {
			client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
			t.Cleanup(func() { client.Close() })
			l, err := ratelimitredis.New(client, &ratelimitredis.Config{Algorithm: a, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, &ratelimittest.Options{Clients: 10, Quota: 100})
	}
}

// A Clock is moved by hand, so that windows roll over without sleeping;
// its Now method is what a store's Config.Now takes.
func ExampleClock() {
	c := ratelimittest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	c.Advance(90 * time.Second)
	fmt.Println(c.Now().Format(time.TimeOnly))
	// Output: 12:01:30
}
