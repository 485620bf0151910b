package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
)

// Example tables (the migrations' examples set), created in each test's isolated schema.
const (
	pgDDL = `
CREATE TABLE inventory (id bigint PRIMARY KEY, sku text NOT NULL, stock integer NOT NULL, version bigint NOT NULL DEFAULT 1);
CREATE TABLE counters (id bigint PRIMARY KEY, value bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 1);
CREATE TABLE jobs (id bigserial PRIMARY KEY, payload text NOT NULL, state text NOT NULL DEFAULT 'pending', claimed_by text, claimed_at timestamptz);`
	myDDL = `
CREATE TABLE inventory (id BIGINT PRIMARY KEY, sku VARCHAR(64) NOT NULL, stock INT NOT NULL, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB;
CREATE TABLE counters (id BIGINT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB;
CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT NOT NULL, state VARCHAR(16) NOT NULL DEFAULT 'pending', claimed_by VARCHAR(64), claimed_at DATETIME(6)) ENGINE=InnoDB;`
)

// pgPool returns a pool of up to maxConns connections on a fresh schema
// holding the example tables.
func pgPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), pgDDL); err != nil {
		t.Fatal(err)
	}
	return pool
}

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
