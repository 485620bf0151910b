package optimisticmysql_test

import (
	"database/sql"
	"testing"

	"github.com/concurkit/concurkit/testkit"
)

// The example tables (migrations' examples set), as in the optimistic package's suite.
const (
	myInventory = `CREATE TABLE inventory (id BIGINT PRIMARY KEY, sku VARCHAR(64) NOT NULL, stock INT NOT NULL, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB`
	myCounters  = `CREATE TABLE counters (id BIGINT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB`
)

// myDB returns a *sql.DB on an isolated database (testkit: 100 open
// connections) holding the example tables.
func myDB(t testing.TB) *sql.DB {
	t.Helper()
	db := testkit.MySQL(t)
	for _, ddl := range []string{myInventory, myCounters} {
		if _, err := db.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	return db
}
