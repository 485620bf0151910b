package redis_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redis"
	"github.com/concurkit/concurkit/internal/locktest"
)

func TestConformance(t *testing.T) {
	c, _ := redisEnv(t)
	_, src := tokenSource(t) // one sequence shared by every instance
	addr := c.Options().Addr
	locktest.Run(t, func(t *testing.T) distlock.Locker {
		// A client per Locker, as another process would have.
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		l, err := redis.New(c, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, locktest.Options{ShortTTL: 200 * time.Millisecond})
}
