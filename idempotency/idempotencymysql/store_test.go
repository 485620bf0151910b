package idempotencymysql_test

import (
	"context"
	"database/sql"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"testing"

	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// migrated returns the DSN of a fresh database with the toolkit
// migrations applied (the key table as users get it) and a *sql.DB on it.
func migrated(t testing.TB) (string, *sql.DB) {
	t.Helper()
	dsn := testkit.MySQLDSN(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, dsn); err != nil {
		t.Fatal(err)
	}
	return dsn, testkit.MySQLFor(t, dsn)
}

func newEnv(t *testing.T) idemtest.Env {
	t.Helper()
	_, db := migrated(t)
	s, err := idempotencymysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return idemtest.MySQLEnv(t, db, s)
}

func TestSuite(t *testing.T) { idemtest.Run(t, newEnv, storeLimit(t)) }

// storeLimit returns a response size the server cannot keep: just over its
// max_allowed_packet (a statement is one packet), 0 (not tested) when that
// is over 64 MiB.
func storeLimit(t *testing.T) int {
	t.Helper()
	var n int
	if err := testkit.MySQL(t).QueryRowContext(t.Context(), `SELECT @@max_allowed_packet`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 64<<20 {
		t.Logf("max_allowed_packet is %d: responses over it are not tested", n)
		return 0
	}
	return n + 1<<20
}

func newPhaseEnv(t *testing.T) idemtest.PhaseEnv[*sql.Tx] {
	t.Helper()
	_, db := migrated(t)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE rides (id VARBINARY(255) PRIMARY KEY, charge VARCHAR(64) NOT NULL DEFAULT '') ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	s, err := idempotencymysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return phaseEnv(s, db)
}

// phaseEnv is the PhaseEnv of s with the rides table in db's database.
func phaseEnv(s *idempotencymysql.Store, db *sql.DB) idemtest.PhaseEnv[*sql.Tx] {
	return idemtest.PhaseEnv[*sql.Tx]{
		Store: s,
		InsertRide: func(ctx context.Context, tx *sql.Tx, id string) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO rides (id) VALUES (?)`, id)
			return err
		},
		SetCharge: func(ctx context.Context, tx *sql.Tx, id, charge string) error {
			_, err := tx.ExecContext(ctx, `UPDATE rides SET charge = ? WHERE id = ?`, charge, id)
			return err
		},
		Charge: func(ctx context.Context, tx *sql.Tx, id string) (string, error) {
			var c string
			err := tx.QueryRowContext(ctx, `SELECT charge FROM rides WHERE id = ?`, id).Scan(&c)
			return c, err
		},
		Rides: func(ctx context.Context) (int, error) {
			var n int
			err := db.QueryRowContext(ctx, `SELECT count(*) FROM rides`).Scan(&n)
			return n, err
		},
		KillTx: func(ctx context.Context, tx *sql.Tx) error {
			var id int64
			if err := tx.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
				return err
			}
			_, err := db.ExecContext(ctx, `KILL ?`, id)
			return err
		},
	}
}

func TestPhases(t *testing.T) { idemtest.Phases(t, newPhaseEnv) }

func TestPhasesLargeResult(t *testing.T) {
	if n := storeLimit(t); n > 0 {
		idemtest.PhasesLargeResult(t, newPhaseEnv(t), n)
	}
}
