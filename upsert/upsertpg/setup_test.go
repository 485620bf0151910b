package upsertpg_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

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

const pgDDL = `CREATE TABLE profiles (id bigint PRIMARY KEY, name text NOT NULL, visits bigint NOT NULL DEFAULT 0)`

// pgPool returns a pool on an isolated schema holding the profiles table.
func pgPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := testkit.Postgres(t)
	if _, err := pool.Exec(t.Context(), pgDDL); err != nil {
		t.Fatal(err)
	}
	return pool
}
