package idempotencymysql_test

import (
	"context"
	"database/sql"
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
	return idemtest.Env{Store: s, Counter: idemtest.MySQLCounter(t, db), Rows: func(ctx context.Context) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM concurkit_idempotency_keys`).Scan(&n)
		return n, err
	}}
}

func TestSuite(t *testing.T) { idemtest.Run(t, newEnv) }
