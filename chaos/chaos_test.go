package chaos_test

import (
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/chaos"
	"github.com/concurkit/concurkit/testkit"
)

// endpoints resolves the servers of a counter run on backend through
// testkit: unreachable fails the test under CI=true and skips it otherwise.
func endpoints(t *testing.T, backend string) *chaos.Endpoints {
	t.Helper()
	e := &chaos.Endpoints{Postgres: testkit.PostgresServerURL(t)}
	switch backend {
	case "redis":
		e.Redis = testkit.RedisAddr(t)
	case "etcd":
		c, _ := testkit.Etcd(t)
		e.Etcd = c.Endpoints()
	case "dynamodb":
		e.DynamoDB = testkit.DynamoDBEndpoint(t)
	}
	return e
}

// TestCounter is the short form of the fenced-counter runs that CI makes:
// with every nemesis, fencing on must leave no anomaly, and the same seed
// with fencing off must show one — if it does not, the run's faults were
// too weak to mean anything.
func TestCounter(t *testing.T) {
	for _, backend := range []string{"redis", "etcd"} {
		for _, unsafe := range []bool{false, true} {
			name := backend + "/safe"
			if unsafe {
				name = backend + "/unsafe"
			}
			t.Run(name, func(t *testing.T) {
				s, err := chaos.Run(t.Context(), &chaos.Config{
					Workload: "counter", Backend: backend, Unsafe: unsafe, Endpoints: endpoints(t, backend),
					Duration: 10 * time.Second, TTL: 300 * time.Millisecond, Seed: 20261207, Out: t.TempDir(),
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Log(s)
				if s.Ops["incr/ok"] == 0 || s.Faults[chaos.NemesisPause] == 0 {
					t.Fatalf("no increment or no pause: the run proves nothing\n%s", s)
				}
				if unsafe == s.Report.Valid {
					t.Errorf("verdict %v with unsafe=%v: %+v", s.Report.Valid, unsafe, s.Report.Anomalies)
				}
			})
		}
	}
}

// TestRunConfig: a Config Run cannot carry out is an error before any
// server is touched.
func TestRunConfig(t *testing.T) {
	for _, cfg := range []*chaos.Config{
		nil,
		{Workload: "nope", Backend: "redis"},
		{Workload: "counter", Backend: "mysql"},
		{Workload: "counter", Backend: "redis", Nemeses: []string{"earthquake"}},
		{Workload: "counter", Backend: "redis", Workers: -1},
		{Workload: "counter", Backend: "redis", TTL: -time.Second},
	} {
		_, err := chaos.Run(t.Context(), cfg)
		if !errors.Is(err, chaos.ErrInvalidConfig) || !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
