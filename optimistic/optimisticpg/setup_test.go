package optimisticpg_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
)

// pgDDL is the example tables (migrations' examples set), as in the optimistic package's suite.
const pgDDL = `CREATE TABLE inventory (id bigint PRIMARY KEY, sku text NOT NULL, stock integer NOT NULL, version bigint NOT NULL DEFAULT 1);
CREATE TABLE counters (id bigint PRIMARY KEY, value bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 1)`

// pgPool returns a pool on an isolated schema holding the example tables.
func pgPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := testkit.Postgres(t)
	if _, err := pool.Exec(t.Context(), pgDDL); err != nil {
		t.Fatal(err)
	}
	return pool
}
