package bench

// Distributed-lock strategies: the lock servers' clients and concurkit's
// lock backends. Every call into distlock is in this file; see
// strategies.go.

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
)

// redisFenceTTL keeps the redis backend's per-key fence record (the highest
// token that took each lock) for a minute after the run instead of the
// default day: every run uses lock keys of its own, so nothing needs them
// later, and the benchmark should leave nothing behind.
const redisFenceTTL = time.Minute

// lockClients are the connections to the lock servers of one run. A server
// that cannot be reached leaves its client nil and its error set: the
// strategies that need it are skipped, with that error as the reason.
type lockClients struct {
	redis    *goredis.Client
	redisErr error
	etcd     *clientv3.Client
	etcdErr  error
}

// openLockClients connects to the lock servers the strategies need and
// checks that they answer (2 s each).
func openLockClients(ctx context.Context, s *Settings, redis, etcd bool) *lockClients {
	l := &lockClients{}
	if redis {
		c := goredis.NewClient(&goredis.Options{Addr: s.RedisAddr, PoolSize: 128})
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		if err != nil {
			_ = c.Close()
			l.redisErr = fmt.Errorf("redis %s: %w", s.RedisAddr, err)
		} else {
			l.redis = c
		}
	}
	if etcd {
		c, err := clientv3.New(clientv3.Config{Endpoints: s.EtcdEndpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = c.Get(pctx, "concurkit-bench-ping")
			cancel()
			if err != nil {
				_ = c.Close()
			}
		}
		if err != nil {
			l.etcdErr = fmt.Errorf("etcd %v: %w", s.EtcdEndpoints, err)
		} else {
			l.etcd = c
		}
	}
	return l
}

func (l *lockClients) close() {
	if l.redis != nil {
		_ = l.redis.Close()
	}
	if l.etcd != nil {
		_ = l.etcd.Close()
	}
}

// available returns nil when backend's server answered, or why not.
func (l *lockClients) available(backend string) error {
	switch backend {
	case "redis":
		if l.redis == nil {
			return fmt.Errorf("%w: %w", errSkip, l.redisErr)
		}
	case "etcd":
		if l.etcd == nil {
			return fmt.Errorf("%w: %w", errSkip, l.etcdErr)
		}
	}
	return nil
}

// locker returns a Locker of backend; src mints the redis backend's tokens.
func (l *lockClients) locker(backend string, src fenced.Source) (distlock.Locker, error) {
	if err := l.available(backend); err != nil {
		return nil, err
	}
	switch backend {
	case "redis":
		return redislock.New(l.redis, &redislock.Config{Source: src, FenceTTL: redisFenceTTL})
	case "etcd":
		return etcdlock.New(l.etcd, nil)
	}
	return nil, fmt.Errorf("bench: unknown lock backend %q", backend)
}

// withLeases acquires the lock of every row of o, in ascending key order
// (two holders of different lock servers' locks have no deadlock detector:
// a fixed order is the only guard), runs fn with each row's token, and
// releases the leases. A release that fails is counted, not fatal: the
// write is done and the server frees the lock at its TTL.
func withLeases(ctx context.Context, locker distlock.Locker, prefix, table string, o *op, rec *recorder,
	fn func(ctx context.Context, tokens map[int64]fenced.Token) error) error {
	keys := sortedKeys(o)
	leases := make([]distlock.Lease, 0, len(keys))
	defer func() {
		for i := len(leases) - 1; i >= 0; i-- {
			if err := leases[i].Release(ctx); err != nil {
				rec.releaseErrors++
			}
		}
	}()
	tokens := make(map[int64]fenced.Token, len(keys))
	for _, k := range keys {
		l, err := locker.Acquire(ctx, lockKey(prefix, table, k), &distlock.Options{TTL: lockTTL})
		if err != nil {
			return err
		}
		leases = append(leases, l)
		tokens[k] = l.Token()
	}
	return fn(ctx, tokens)
}
