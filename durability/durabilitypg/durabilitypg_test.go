package durabilitypg_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/durability"
	"github.com/concurkit/concurkit/durability/durabilitypg"
	"github.com/concurkit/concurkit/testkit"
)

// problems returns Check's problems as "loss setting" pairs.
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
		out = append(out, p.Loss.String()+" "+p.Setting)
	}
	return out
}

// TestSingleServer: the session's synchronous_commit decides, and a single
// server has no failover to lose commits to.
func TestSingleServer(t *testing.T) {
	t.Parallel()
	conn := testkit.PostgresConn(t, testkit.PostgresURL(t))
	ctx := t.Context()
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	var base []string
	if fsync == "off" { // scripts/services.sh's fast profile
		base = []string{"crash fsync"}
	}
	for _, tc := range []struct {
		setting string
		want    []string
	}{
		{"on", base},
		{"local", base},
		{"off", append(slices.Clone(base), "crash synchronous_commit")},
	} {
		if _, err := conn.Exec(ctx, "SET synchronous_commit = "+tc.setting); err != nil {
			t.Fatal(err)
		}
		if got := problems(t, durabilitypg.Check(ctx, conn)); !slices.Equal(got, tc.want) {
			t.Errorf("synchronous_commit = %s: problems %q, want %q", tc.setting, got, tc.want)
		}
	}
}

// TestReplicated: on scripts/services.sh's replicated primary, the
// asynchronous standby is the one failover that loses commits; a session
// that does not wait for the synchronous one loses it too; a session on a
// standby takes no writes.
func TestReplicated(t *testing.T) {
	t.Parallel()
	r := testkit.PostgresReplicated(t)
	ctx := t.Context()
	primary := testkit.PostgresConn(t, r.Primary)
	if got, want := problems(t, durabilitypg.Check(ctx, primary)), []string{"failover standby pgasync"}; !slices.Equal(got, want) {
		t.Errorf("primary: problems %q, want %q", got, want)
	}
	if _, err := primary.Exec(ctx, "SET synchronous_commit = local"); err != nil {
		t.Fatal(err)
	}
	if got, want := problems(t, durabilitypg.Check(ctx, primary)), []string{"failover standby pgasync", "failover standby pgsync"}; !slices.Equal(got, want) {
		t.Errorf("primary, synchronous_commit = local: problems %q, want %q", got, want)
	}
	for _, url := range []string{r.SyncStandby, r.AsyncStandby} {
		standby := testkit.PostgresConn(t, url)
		err := durabilitypg.Check(ctx, standby)
		var de *durability.Error
		if !errors.As(err, &de) || !de.Has(durability.NotWritable) {
			t.Errorf("standby: Check = %v, want a not-writable problem", err)
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	var pool *pgxpool.Pool
	for _, db := range []durabilitypg.DBTX{nil, pool} {
		if err := durabilitypg.Check(t.Context(), db); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("Check(%T nil) = %v, want ErrInvalidArgument", db, err)
		}
	}
	conn := testkit.PostgresConn(t, testkit.PostgresURL(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := durabilitypg.Check(ctx, conn)
	if !errors.Is(err, context.Canceled) || errors.Is(err, durability.ErrNotDurable) {
		t.Errorf("Check with a cancelled context = %v, want context.Canceled and not ErrNotDurable", err)
	}
}
