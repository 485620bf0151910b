package pglock_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
)

// pgURL is the server's own URL: every locker of a test must draw tokens
// from the same sequence, so they share the default schema rather than
// one isolated schema each.
func pgURL(t testing.TB) string { return testkit.PostgresServerURL(t) }

func pool(t testing.TB) *pgxpool.Pool { return testkit.PostgresPoolFor(t, pgURL(t)) }
