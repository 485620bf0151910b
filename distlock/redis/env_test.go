package redis_test

// Stopgap until internal/testenv is committed: the same shapes as
// testenv.Redis and testenv.Postgres, on the services script's endpoints.

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/fenced"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func redisEnv(t testing.TB) (*goredis.Client, string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: envOr("CONCURKIT_REDIS_ADDR", "127.0.0.1:16379")})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Skipf("redis unreachable (run scripts/services.sh up): %v", err)
	}
	return c, "t:" + strings.ToLower(rand.Text()[:10]) + ":"
}

// tokenSource returns a PostgreSQL sequence source on a fresh sequence.
func tokenSource(t testing.TB) (*pgxpool.Pool, fenced.Source) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, envOr("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Skipf("postgres unreachable (run scripts/services.sh up): %v", err)
	}
	name := "seq_" + strings.ToLower(rand.Text()[:12])
	if err := fenced.CreatePostgresSequence(ctx, pool, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SEQUENCE IF EXISTS "+name) })
	src, err := fenced.NewPostgresSequence(pool, name)
	if err != nil {
		t.Fatal(err)
	}
	return pool, src
}
