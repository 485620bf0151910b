package idempotencypg_test

import (
	"context"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"testing"

	"github.com/jackc/pgx/v5"
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
	return idemtest.PGEnv(t, pool, s)
}

// TestSuite runs the store suite; PostgreSQL keeps responses of any size
// the middleware buffers (bytea holds 1 GB).
func TestSuite(t *testing.T) { idemtest.Run(t, newEnv, 0) }

func newPhaseEnv(t *testing.T) idemtest.PhaseEnv[pgx.Tx] {
	t.Helper()
	_, pool := migrated(t)
	return phaseEnvOn(t, pool)
}

// phaseEnvOn is newPhaseEnv on pool, whose schema has the key table.
func phaseEnvOn(t *testing.T, pool *pgxpool.Pool) idemtest.PhaseEnv[pgx.Tx] {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `CREATE TABLE rides (id text PRIMARY KEY, charge text NOT NULL DEFAULT '')`); err != nil {
		t.Fatal(err)
	}
	s, err := idempotencypg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return idemtest.PhaseEnv[pgx.Tx]{
		Store: s,
		InsertRide: func(ctx context.Context, tx pgx.Tx, id string) error {
			_, err := tx.Exec(ctx, `INSERT INTO rides (id) VALUES ($1)`, id)
			return err
		},
		SetCharge: func(ctx context.Context, tx pgx.Tx, id, charge string) error {
			_, err := tx.Exec(ctx, `UPDATE rides SET charge = $2 WHERE id = $1`, id, charge)
			return err
		},
		Charge: func(ctx context.Context, tx pgx.Tx, id string) (string, error) {
			var c string
			err := tx.QueryRow(ctx, `SELECT charge FROM rides WHERE id = $1`, id).Scan(&c)
			return c, err
		},
		Rides: func(ctx context.Context) (int, error) {
			var n int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM rides`).Scan(&n)
			return n, err
		},
		KillTx: func(ctx context.Context, tx pgx.Tx) error {
			var pid int32
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			_, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
			return err
		},
	}
}

func TestPhases(t *testing.T) { idemtest.Phases(t, newPhaseEnv) }
