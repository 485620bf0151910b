package durabilitymysql_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/durability"
	"github.com/concurkit/concurkit/durability/durabilitymysql"
	"github.com/concurkit/concurkit/testkit"
)

func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var de *durability.Error
	if !errors.As(err, &de) || !errors.Is(err, durability.ErrNotDurable) {
		t.Fatalf("Check: %v, want a *durability.Error", err)
	}
	var out []string
	for _, p := range de.Problems {
		out = append(out, p.Loss.String()+" "+p.Setting+" = "+p.Value)
	}
	return out
}

// TestSingleServer: a single MariaDB keeps its commits through a crash only
// when it flushes its redo log at each commit (scripts/services.sh's fast
// profile does not).
func TestSingleServer(t *testing.T) {
	t.Parallel()
	db := testkit.MySQL(t)
	var flush string
	if err := db.QueryRowContext(t.Context(), "SELECT @@innodb_flush_log_at_trx_commit").Scan(&flush); err != nil {
		t.Fatal(err)
	}
	var want []string
	if flush != "1" {
		want = []string{"crash innodb_flush_log_at_trx_commit = " + flush}
	}
	if got := problems(t, durabilitymysql.Check(t.Context(), db)); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// TestGalera: every node of a 3-node cluster in the primary component
// keeps what it acknowledged, whatever its own flush setting.
func TestGalera(t *testing.T) {
	t.Parallel()
	for _, dsn := range testkit.GaleraDSNs(t) {
		db := testkit.MySQLFor(t, dsn)
		if err := durabilitymysql.Check(t.Context(), db); err != nil {
			t.Errorf("Check on a Galera node: %v, want nil", err)
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	var db *sql.DB
	for _, h := range []durabilitymysql.DBTX{nil, db} {
		if err := durabilitymysql.Check(t.Context(), h); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("Check(%T nil) = %v, want ErrInvalidArgument", h, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := durabilitymysql.Check(ctx, testkit.MySQL(t))
	if !errors.Is(err, context.Canceled) || errors.Is(err, durability.ErrNotDurable) {
		t.Errorf("Check with a cancelled context = %v, want context.Canceled and not ErrNotDurable", err)
	}
}
