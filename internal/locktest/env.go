package locktest

// Temporary: until internal/testenv lands, the default Store connects to
// the PostgreSQL of scripts/services.sh itself; then this delegates to
// testenv.Postgres.

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func postgres(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err == nil {
		err = pool.Ping(context.Background())
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("locktest: postgres unreachable: %v", err)
		}
		t.Skipf("locktest: postgres unreachable (%v): run scripts/services.sh up", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
