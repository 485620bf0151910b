package idempotencymysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// TestDSNOptions runs the suite through a DSN without parseTime (DATETIME
// arrives as text), with clientFoundRows (an UPDATE reports the rows it
// matched, not those it changed) and interpolateParams (no server-side
// prepared statements): the store must not depend on any of them.
func TestDSNOptions(t *testing.T) {
	newDB := func(t *testing.T) *sql.DB {
		dsn, _ := migrated(t)
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ParseTime, cfg.ClientFoundRows, cfg.InterpolateParams = false, true, true
		return testkit.MySQLFor(t, cfg.FormatDSN())
	}
	newEnv := func(t *testing.T) idemtest.Env {
		db := newDB(t)
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
	t.Run("Conformance", func(t *testing.T) { idemtest.Conformance(t, newEnv) })
	t.Run("Expiry", func(t *testing.T) { idemtest.Expiry(t, newEnv(t)) })
	t.Run("Reap", func(t *testing.T) { idemtest.Reap(t, newEnv(t)) })
	t.Run("TakeOver", func(t *testing.T) { idemtest.TakeOver(t, newEnv(t)) })
	t.Run("Do", func(t *testing.T) { idemtest.Do(t, newEnv(t)) })
	t.Run("Concurrent", func(t *testing.T) { idemtest.Concurrent(t, newEnv(t), 40, 8) })
}
