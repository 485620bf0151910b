package upsertmysql_test

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/testkit"
	"github.com/concurkit/concurkit/upsert"
)

// profile is a row of the profiles table, as in the upsert package suite.
type profile struct {
	ID     int64
	Name   string
	Visits int64
}

func (p profile) row() map[string]any {
	return map[string]any{"id": p.ID, "name": p.Name, "visits": p.Visits}
}

var returning = []string{"id", "name", "visits"}

func (p *profile) dest() []any { return []any{&p.ID, &p.Name, &p.Visits} }

var tbl = upsert.Table{Name: "profiles", KeyColumn: "id"}

const myDDL = `CREATE TABLE profiles (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, visits BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`

// myDB returns a *sql.DB (testkit: 100 open connections) on an isolated
// database holding the profiles table, with the driver's clientFoundRows
// option as asked.
func myDB(t testing.TB, foundRows bool) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testkit.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = foundRows
	db := testkit.MySQLFor(t, cfg.FormatDSN())
	if _, err := db.ExecContext(t.Context(), myDDL); err != nil {
		t.Fatal(err)
	}
	return db
}
