package locktest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/testenv"
)

// postgres returns a pool on a fresh schema of the test PostgreSQL.
func postgres(t *testing.T) *pgxpool.Pool { return testenv.Postgres(t) }
