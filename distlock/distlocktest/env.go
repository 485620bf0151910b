package distlocktest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
)

// postgres returns a pool on a fresh schema of the test PostgreSQL.
func postgres(t *testing.T) *pgxpool.Pool { return testkit.Postgres(t) }
