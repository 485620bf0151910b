package pessimistic_test

// Temporary server lookup until internal/testenv lands; it follows the same
// rules (env variable, then the script's default port) and isolates each
// test in its own schema / database.

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func unreachable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s unreachable: %v", what, err)
	}
	t.Skipf("%s unreachable (%v): run scripts/services.sh up", what, err)
}

// pgURLForTest returns the URL of a fresh schema (search_path set).
func pgURLForTest(t testing.TB) string {
	t.Helper()
	base := envOr("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		unreachable(t, "PostgreSQL", err)
	}
	defer c.Close(ctx)
	schema := fmt.Sprintf("pess_%x", rand.Uint64())
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// myDSNForTest returns the DSN of a fresh database.
func myDSNForTest(t testing.TB) string {
	t.Helper()
	base := envOr("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/")
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := fmt.Sprintf("pess_%x", rand.Uint64())
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		unreachable(t, "MariaDB", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", base)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE " + name); err != nil {
			t.Error(err)
		}
	})
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.MultiStatements = true
	return cfg.FormatDSN()
}
