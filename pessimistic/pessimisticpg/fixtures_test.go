package pessimisticpg_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/testkit"
)

// The package starts no goroutines of its own; goleak checks that none of
// the tests' goroutines outlive them either.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pgDDL: the example tables, created in each test's isolated schema.
const pgDDL = `
CREATE TABLE inventory (id bigint PRIMARY KEY, sku text NOT NULL, stock integer NOT NULL, version bigint NOT NULL DEFAULT 1);
CREATE TABLE counters (id bigint PRIMARY KEY, value bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 1);
CREATE TABLE jobs (id bigserial PRIMARY KEY, payload text NOT NULL, state text NOT NULL DEFAULT 'pending', claimed_by text, claimed_at timestamptz);`

// pgPool returns a pool of up to maxConns connections on a fresh schema
// holding the example tables.
func pgPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), pgDDL); err != nil {
		t.Fatal(err)
	}
	return pool
}

// eventually polls cond (an observation of server state, not a sleep used
// for ordering) every interval until it holds, failing after 10 s.
func eventually(t *testing.T, what string, interval time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(interval)
	}
}

// envOr returns the environment variable k, or d when it is unset. The
// Examples use it to find the script's servers without testkit.
func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// once disables retries.
var once = retry.Policy{MaxAttempts: 1}
