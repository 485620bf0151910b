package zklock_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
)

// fenceTable creates the fenced table (id, value, max_seen_token) in a
// fresh schema and returns the pool using it.
func fenceTable(t testing.TB) *pgxpool.Pool {
	t.Helper()
	db := testkit.Postgres(t)
	if _, err := db.Exec(context.Background(), fenceDDL); err != nil {
		t.Fatal(err)
	}
	return db
}

const fenceDDL = `CREATE TABLE fence (id bigint PRIMARY KEY, value text NOT NULL DEFAULT '', max_seen_token bigint NOT NULL DEFAULT 0)`
