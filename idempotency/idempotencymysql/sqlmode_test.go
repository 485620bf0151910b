package idempotencymysql_test

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// simultaneous is the session sql_mode of MariaDB's documented
// SIMULTANEOUS_ASSIGNMENT mode, added to the server's default: every
// assignment of an UPDATE (and of ON DUPLICATE KEY UPDATE) reads the
// row's old values, not those of the assignments to its left.
const simultaneous = "CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"

// modeDB returns a *sql.DB on a fresh migrated database whose every
// connection sets sql_mode (a DSN system variable: SET sql_mode = <expr>
// at connect); "" keeps the server's default.
func modeDB(t *testing.T, sqlMode string) *sql.DB {
	t.Helper()
	dsn, _ := migrated(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if sqlMode != "" {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["sql_mode"] = sqlMode
	}
	db := testkit.MySQLFor(t, cfg.FormatDSN())
	var mode string
	if err := db.QueryRowContext(t.Context(), `SELECT @@SESSION.sql_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	t.Logf("sql_mode = %s", mode)
	return db
}

// sqlModes are the modes every sql_mode-sensitive test runs under.
var sqlModes = []struct{ name, expr string }{
	{"default", ""},
	{"SIMULTANEOUS_ASSIGNMENT", simultaneous},
}

// modeEnv returns a newEnv for the suite whose connections run under
// sqlMode.
func modeEnv(sqlMode string) func(t *testing.T) idemtest.Env {
	return func(t *testing.T) idemtest.Env {
		db := modeDB(t, sqlMode)
		s, err := idempotencymysql.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		return idemtest.MySQLEnv(t, db, s)
	}
}

// TestSuiteSimultaneousAssignment runs the claim's tests of the store
// suite (TestSuite runs all of it under the server's default sql_mode)
// with SIMULTANEOUS_ASSIGNMENT, under which ON DUPLICATE KEY UPDATE's
// assignments all read the old row: ConcurrentClaims shows that of
// concurrent claims of a released or timed-out key exactly one runs. The
// other statements assign bound values only, which both modes evaluate
// alike; they are not run twice.
func TestSuiteSimultaneousAssignment(t *testing.T) {
	newEnv := modeEnv(simultaneous)
	t.Run("Conformance", func(t *testing.T) { idemtest.Conformance(t, newEnv) })
	t.Run("TakeOver", func(t *testing.T) { idemtest.TakeOver(t, newEnv(t)) })
	t.Run("Concurrent", func(t *testing.T) { idemtest.Concurrent(t, newEnv(t), 200, 8) })
	t.Run("ConcurrentClaims", func(t *testing.T) { idemtest.ConcurrentClaims(t, newEnv(t).Store, 20, 8) })
	t.Run("ClientGivesUp", func(t *testing.T) { idemtest.ClientGivesUp(t, newEnv(t), 200) })
	t.Run("ClaimCancelled", func(t *testing.T) { idemtest.ClaimCancelled(t, newEnv(t), 300) })
}
