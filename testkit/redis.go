package testkit

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// redlockNodes is the number of independent Redis masters Redlock gets.
const redlockNodes = 5

// RedisPoolSize is the PoolSize of the clients returned here.
const RedisPoolSize = 100

var redisServer = &server{
	name:      "Redis",
	envVar:    "CONCURKIT_REDIS_ADDR",
	def:       "127.0.0.1:16379",
	addrs:     hostPorts,
	container: redisContainer,
}

var redlockServer = &server{
	name:      "Redis (Redlock masters)",
	envVar:    "CONCURKIT_REDLOCK_ADDRS",
	def:       "127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384",
	addrs:     hostPorts,
	container: redlockContainers,
}

// RedisAddr returns the host:port of the shared single Redis server.
func RedisAddr(t testing.TB) string {
	t.Helper()
	return redisServer.get(t)
}

// RedlockAddrs returns the host:port of each independent Redis master.
func RedlockAddrs(t testing.TB) []string {
	t.Helper()
	return splitList(redlockServer.get(t))
}

// Redis returns a client of the single Redis server and a fresh key prefix
// "ck:<random>:". Keys with that prefix are deleted and the client closed at
// cleanup.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	prefix := Name("ck:") + ":"
	return RedisClient(t, RedisAddr(t), prefix), prefix
}

// Redlock returns one client per independent Redis master (5 with the
// script) and a fresh key prefix; cleanup as for Redis.
func Redlock(t testing.TB) ([]*redis.Client, string) {
	t.Helper()
	addrs := RedlockAddrs(t)
	prefix := Name("ck:") + ":"
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = RedisClient(t, a, prefix)
	}
	return cs, prefix
}

// RedisClient returns a client for addr (PoolSize RedisPoolSize, no retries,
// ContextTimeoutEnabled so a context deadline bounds each call), closed at
// cleanup, after deleting the keys that start with prefix (none if prefix is
// empty). Useful with the Addr of a Proc from StartRedis.
func RedisClient(t testing.TB, addr, prefix string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:     addr,
		PoolSize: RedisPoolSize,
		// Fault tests kill servers: give up quickly instead of retrying.
		MaxRetries: -1,
		// Per-call context deadlines reach the socket (per-node timeouts).
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() {
		defer func() { _ = c.Close() }()
		if prefix == "" {
			return
		}
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := deleteRedisPrefix(ctx, c, prefix); err != nil {
			t.Logf("testenv: delete redis keys %s* on %s: %v", prefix, addr, err)
		}
	})
	ctx, cancel := setupContext(t)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: redis ping %s: %v", addr, err)
	}
	return c
}

func deleteRedisPrefix(ctx context.Context, c *redis.Client, prefix string) error {
	// Escape glob characters so the prefix matches literally.
	pattern := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(prefix) + "*"
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
