package redlock_test

import (
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/testkit"
)

// sharedSources gives every Locker of one (sub)test the same token source,
// as all instances of a service share one sequence. The source's pool
// belongs to that subtest and is closed by its cleanup, before the suite's
// goroutine-leak check.
type sharedSources struct {
	mu  sync.Mutex
	src map[string]fenced.Source
}

func (s *sharedSources) get(t *testing.T) fenced.Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	if src, ok := s.src[t.Name()]; ok {
		return src
	}
	_, src := tokenSource(t)
	if s.src == nil {
		s.src = map[string]fenced.Source{}
	}
	s.src[t.Name()] = src
	return src
}

func TestConformance(t *testing.T) {
	addrs := testkit.RedlockAddrs(t)
	var sources sharedSources
	distlocktest.Run(t, func(t *testing.T) distlock.Locker {
		// Clients per Locker, as another process would have;
		// ContextTimeoutEnabled so the per-node timeout reaches the socket.
		nodes := make([]*goredis.Client, len(addrs))
		for i, a := range addrs {
			nodes[i] = goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = nodes[i].Close() })
		}
		// NodeTimeout well above the default 50 ms: the suite checks the
		// contract, not the latency of five masters on a loaded 2-core
		// machine under -race (the frozen-master tests check the bounds).
		l, err := redlock.New(nodes, &redlock.Config{Source: sources.get(t), FenceTTL: time.Minute, NodeTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, distlocktest.Options{}) // default TTLs: a 200 ms lease is too tight for auto-extend on a loaded machine
}
