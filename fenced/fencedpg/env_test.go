package fencedpg_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
)

// env reads a variable for the Examples, which cannot use testkit.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func pgPool(t testing.TB) *pgxpool.Pool { return testkit.Postgres(t) }
