package postgres_test

// Temporary server access until internal/testenv lands (then pool
// delegates to testenv.Postgres).

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func pgURL() string {
	if v := os.Getenv("CONCURKIT_POSTGRES_URL"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
}

func pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), pgURL())
	if err == nil {
		err = p.Ping(context.Background())
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("postgres unreachable: %v", err)
		}
		t.Skipf("postgres unreachable (%v): run scripts/services.sh up", err)
	}
	t.Cleanup(p.Close)
	return p
}
