package redislock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/testkit"
)

// redisEnv returns a client of the shared server and a key prefix; the
// lock and fence keys of user keys with that prefix ("ck:{<prefix>…")
// are deleted at cleanup.
func redisEnv(t testing.TB) (*goredis.Client, string) {
	t.Helper()
	c, prefix := testkit.Redis(t)
	deleteLockKeys(t, prefix, c)
	return c, prefix
}

// tokenSource returns a pool on a fresh schema and a PostgreSQL sequence
// source in it.
func tokenSource(t testing.TB) (*pgxpool.Pool, fenced.Source) {
	t.Helper()
	pool := testkit.Postgres(t)
	if err := fencedpg.CreateSequence(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	src, err := fencedpg.NewSequence(pool)
	if err != nil {
		t.Fatal(err)
	}
	return pool, src
}

// deleteLockKeys deletes, at cleanup, the Redis keys of every user key
// that starts with prefix (the prefix has no '%', '{' or '}', so the
// encoded keys start with "ck:{" + prefix).
func deleteLockKeys(t testing.TB, prefix string, cs ...*goredis.Client) {
	t.Helper()
	pattern := "ck:{" + strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(prefix) + "*"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range cs {
			iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
			for iter.Next(ctx) {
				_ = c.Unlink(ctx, iter.Val()).Err()
			}
			if err := iter.Err(); err != nil {
				t.Logf("delete %s on %s: %v", pattern, c.Options().Addr, err)
			}
		}
	})
}
