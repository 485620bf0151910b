package chaos_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/concurkit/concurkit/chaos"
	"github.com/concurkit/concurkit/durability"
	"github.com/concurkit/concurkit/durability/durabilitypg"
	"github.com/concurkit/concurkit/testkit"
)

// TestChaosPostgresFailover fails a PostgreSQL primary over to its standby
// in the middle of the fenced-counter and idempotent-HTTP runs, a few
// times each (the standby stops receiving WAL for a moment, the primary is
// killed, the standby promoted, the old primary rebuilt as its standby).
// With a synchronous standby nothing acknowledged is lost: no anomaly.
// With an asynchronous one the promoted server has forgotten commits it
// acknowledged, and the checkers must say so — and durabilitypg.Check,
// run on the primary before the run, must have warned.
func TestChaosPostgresFailover(t *testing.T) {
	for _, tc := range []struct {
		workload, backend, effect string
	}{
		{"counter", "redis", "incr/ok"},
		{"idempotent", "postgres", "request/ok"},
	} {
		for _, sync := range []bool{true, false} {
			name := tc.workload + "/" + map[bool]string{true: "sync", false: "async"}[sync]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				nodes := testkit.StartPostgresReplication(t, sync)
				checked := durabilitypg.Check(t.Context(), testkit.PostgresConn(t, nodes[0].URL()))
				var de *durability.Error
				switch {
				case sync && checked != nil:
					t.Fatalf("Check on the synchronous primary: %v, want nil", checked)
				case !sync && (!errors.As(checked, &de) || !de.Has(durability.Failover)):
					t.Fatalf("Check on the asynchronous primary: %v, want a failover problem", checked)
				}
				var pn []chaos.PostgresNode
				for _, n := range nodes {
					pn = append(pn, chaos.PostgresNode{URL: n.URL(), Server: n, Rejoin: n.Rejoin})
				}
				f, err := chaos.NewPostgresFailover(pn)
				if err != nil {
					t.Fatal(err)
				}
				e := &chaos.Endpoints{Postgres: nodes[0].URL()}
				if tc.backend == "redis" {
					e.Redis = testkit.RedisAddr(t)
				}
				opts := map[string]string{}
				if tc.workload == "counter" {
					opts = counterOptions
				}
				out := t.TempDir()
				duration := 12 * time.Second
				if tc.workload == "idempotent" {
					duration = 8 * time.Second
				}
				if d, err := time.ParseDuration(os.Getenv("CK_FAILOVER_DURATION")); err == nil {
					duration = d // a longer run by hand
				}
				s, err := chaos.Run(t.Context(), &chaos.Config{
					Workload: tc.workload, Backend: tc.backend, Endpoints: e, Options: opts,
					Duration: duration, TTL: 300 * time.Millisecond, Interval: 1500 * time.Millisecond, Seed: 20261207,
					Nemeses: []string{chaos.NemesisFailover}, Failovers: map[string]chaos.Failover{"postgres": f},
					Out: out,
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Log(s)
				if s.Ops[tc.effect] == 0 || s.Faults[chaos.NemesisFailover] == 0 || s.Skipped > 0 {
					faults, _ := os.ReadFile(filepath.Join(out, "faults.jsonl"))
					t.Fatalf("the run proves nothing (no %s, no failover, or one not injected)\n%s\n%s", tc.effect, s, faults)
				}
				if sync && !s.Report.Valid {
					t.Errorf("synchronous standby: anomalies\n%s", s)
				}
				if !sync && s.Report.Valid {
					t.Errorf("asynchronous standby: no anomaly found — the run could not tell a lost commit\n%s", s)
				}
			})
		}
	}
}

func TestNewPostgresFailoverBadInput(t *testing.T) {
	ok := chaos.PostgresNode{URL: "postgres://postgres@127.0.0.1:5432/postgres", Server: &chaos.PidFileServer{}, Rejoin: func(context.Context, string) error { return nil }}
	noPort, noRejoin := ok, ok
	noPort.URL, noRejoin.Rejoin = "postgres://postgres@127.0.0.1/postgres", nil
	for _, nodes := range [][]chaos.PostgresNode{nil, {ok}, {ok, noPort}, {ok, noRejoin}} {
		if _, err := chaos.NewPostgresFailover(nodes); !errors.Is(err, chaos.ErrInvalidConfig) {
			t.Errorf("%d nodes: %v, want ErrInvalidConfig", len(nodes), err)
		}
	}
	if _, err := chaos.NewPostgresFailover([]chaos.PostgresNode{ok, ok}); err != nil {
		t.Errorf("valid nodes: %v", err)
	}
}
