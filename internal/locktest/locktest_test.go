package locktest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/lease"
	"github.com/concurkit/concurkit/internal/locktest"
)

// memService is an in-process lock service with TTL expiry, a reference
// implementation of the contract used to check the suite itself (the
// backends run the suite against real servers).
type memService struct {
	mu    sync.Mutex
	next  fenced.Token
	locks map[string]memLock
}

type memLock struct {
	token   fenced.Token
	expires time.Time
}

type memLocker struct{ s *memService }

func (l memLocker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	if _, err := lease.Resolve(key, opts); err != nil {
		return nil, err
	}
	return lease.Poll(ctx, lease.PollPolicy{}, func(ctx context.Context) (distlock.Lease, error) {
		return l.TryAcquire(ctx, key, opts)
	})
}

func (l memLocker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := l.s
	start := time.Now()
	s.mu.Lock()
	if cur, ok := s.locks[key]; ok && time.Now().Before(cur.expires) {
		s.mu.Unlock()
		return nil, distlock.ErrNotAcquired
	}
	s.next++
	tok := s.next
	s.locks[key] = memLock{token: tok, expires: start.Add(o.TTL)}
	s.mu.Unlock()
	return lease.New(lease.Config{
		Key: key, Token: tok, TTL: o.TTL, Start: start, AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend: func(_ context.Context, ttl time.Duration) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				cur, ok := s.locks[key]
				if !ok || cur.token != tok || !time.Now().Before(cur.expires) {
					return distlock.ErrLeaseLost
				}
				s.locks[key] = memLock{token: tok, expires: time.Now().Add(ttl)}
				return nil
			},
			Release: func(context.Context) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				if cur, ok := s.locks[key]; ok && cur.token == tok {
					delete(s.locks, key)
					return nil
				}
				return distlock.ErrLeaseLost
			},
		},
	})
}

func TestSuiteOnReferenceLocker(t *testing.T) {
	s := &memService{locks: map[string]memLock{}}
	locktest.Run(t, func(t *testing.T) distlock.Locker { return memLocker{s} }, locktest.Options{ShortTTL: 300 * time.Millisecond})
}
