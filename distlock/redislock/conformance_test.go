package redislock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/redislock"
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
	addr := testkit.RedisAddr(t)
	var sources sharedSources
	distlocktest.Run(t, func(t *testing.T) distlock.Locker {
		c := testkit.RedisClient(t, addr, "") // a client per Locker, as another process would have
		l, err := redislock.New(c, &redislock.Config{Source: sources.get(t), FenceTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, distlocktest.Options{}) // default TTLs: a 200 ms lease is too tight for auto-extend on a loaded machine
}
