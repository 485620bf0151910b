package idempotencypg_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/idempotency/idempotencypg"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// isolationPool returns a pool on a fresh migrated schema whose sessions
// run every transaction, autocommit statements included, at level (the
// server's default_transaction_isolation, set per session as a role or
// postgresql.conf would set it).
func isolationPool(t *testing.T, level string) *pgxpool.Pool {
	t.Helper()
	u, _ := migrated(t)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	q.Set("default_transaction_isolation", level)
	parsed.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads %20, not +
	pool := testkit.PostgresPoolFor(t, parsed.String())
	var got string
	if err := pool.QueryRow(t.Context(), `SHOW transaction_isolation`).Scan(&got); err != nil || got != level {
		t.Fatalf("transaction_isolation %q, %v; want %q", got, err, level)
	}
	return pool
}

// TestSuiteRepeatableRead runs the store suite on sessions whose default
// isolation is REPEATABLE READ (TestSuite runs it under the server's
// default, READ COMMITTED). Each claim is then a transaction with its own
// snapshot, and INSERT … ON CONFLICT DO UPDATE on a row that a concurrent
// claim committed after that snapshot fails with a serialization failure
// (40001) rather than re-checking the newest version: Concurrent and
// ConcurrentClaims show that concurrent duplicates still get 409 (or a
// replay), never 503.
func TestSuiteRepeatableRead(t *testing.T) {
	idemtest.Run(t, func(t *testing.T) idemtest.Env {
		pool := isolationPool(t, "repeatable read")
		s, err := idempotencypg.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		return idemtest.PGEnv(t, pool, s)
	}, 0)
}

// TestPhasesRepeatableRead runs the phases suite on REPEATABLE READ
// sessions.
func TestPhasesRepeatableRead(t *testing.T) {
	idemtest.Phases(t, func(t *testing.T) idemtest.PhaseEnv[pgx.Tx] {
		return phaseEnvOn(t, isolationPool(t, "repeatable read"))
	})
}
