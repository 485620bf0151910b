package fencedmysql_test

import (
	"database/sql"
	"os"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/testkit"
)

// env reads a variable for the Examples, which cannot use testkit.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func myDB(t testing.TB) *sql.DB { return testkit.MySQL(t) }
