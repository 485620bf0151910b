package redis_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/testenv"
)

func redisEnv(t testing.TB) (*goredis.Client, string) {
	t.Helper()
	return testenv.Redis(t)
}

// tokenSource returns a pool on a fresh schema and a PostgreSQL sequence
// source in it.
func tokenSource(t testing.TB) (*pgxpool.Pool, fenced.Source) {
	t.Helper()
	pool := testenv.Postgres(t)
	if err := fenced.CreatePostgresSequence(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	src, err := fenced.NewPostgresSequence(pool)
	if err != nil {
		t.Fatal(err)
	}
	return pool, src
}
