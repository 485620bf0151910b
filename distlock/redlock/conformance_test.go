package redlock_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/internal/locktest"
)

func TestConformance(t *testing.T) {
	cs, _ := redlockEnv(t)
	_, src := tokenSource(t) // one sequence shared by every instance
	locktest.Run(t, func(t *testing.T) distlock.Locker {
		// Clients per Locker, as another process would have.
		nodes := make([]*goredis.Client, len(cs))
		for i, c := range cs {
			nodes[i] = goredis.NewClient(&goredis.Options{Addr: c.Options().Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = nodes[i].Close() })
		}
		l, err := redlock.New(nodes, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, locktest.Options{ShortTTL: 200 * time.Millisecond})
}
