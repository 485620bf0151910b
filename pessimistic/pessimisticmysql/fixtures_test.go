package pessimisticmysql_test

import (
	"database/sql"
	"errors"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/concurkit/concurkit/testkit"
)

// The package starts no goroutines of its own; goleak checks that none of
// the tests' goroutines outlive them either.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// myDDL: the example tables, created in each test's isolated database.
const myDDL = `
CREATE TABLE inventory (id BIGINT PRIMARY KEY, sku VARCHAR(64) NOT NULL, stock INT NOT NULL, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB;
CREATE TABLE counters (id BIGINT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB;
CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT NOT NULL, state VARCHAR(16) NOT NULL DEFAULT 'pending', claimed_by VARCHAR(64), claimed_at DATETIME(6)) ENGINE=InnoDB;`

// myDB returns a handle of up to maxConns connections on a fresh database
// holding the example tables.
func myDB(t testing.TB, maxConns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", testkit.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(myDDL); err != nil {
		t.Fatal(err)
	}
	return db
}

// errSoldOut is what a buyer's closure returns when the stock is gone.
var errSoldOut = errors.New("sold out")

// envOr returns the environment variable k, or d when it is unset. The
// Examples use it to find the script's servers without testkit.
func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
