package idempotencypg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/idempotency/idempotencypg"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// migrated returns the URL of a fresh schema with the toolkit migrations
// applied (the key table as users get it) and a pool on it.
func migrated(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	url := testkit.PostgresURL(t)
	if err := migrations.Up(t.Context(), migrations.Postgres, url); err != nil {
		t.Fatal(err)
	}
	return url, testkit.PostgresPoolFor(t, url)
}

func newEnv(t *testing.T) idemtest.Env {
	t.Helper()
	_, pool := migrated(t)
	s, err := idempotencypg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return idemtest.Env{Store: s, Counter: idemtest.PGCounter(t, pool), Rows: func(ctx context.Context) (int, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM concurkit_idempotency_keys`).Scan(&n)
		return n, err
	}}
}

func TestSuite(t *testing.T) { idemtest.Run(t, newEnv) }
