package chaos_test

import (
	"cmp"
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
	case "mysql":
		e.MySQL = testkit.MySQLServerDSN(t)
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

// TestChaos is the short form of the runs CI makes, every nemesis on: the
// safe run must leave no anomaly, and the same seed with the safety
// mechanism off (fencing, the atomic limiter, the version check) must show
// one — if it does not, the run's faults were too weak to mean anything.
func TestChaos(t *testing.T) {
	for _, tc := range []struct {
		workload, backend string
		effect            string // an op kind/outcome the run must have
		nemeses           []string
		options           map[string]string
		ttl               time.Duration // default 300ms
	}{
		// Counter: pauses are what a missing fence needs, and a think time
		// long enough that a pause usually lands between read and write.
		{"counter", "redis", "incr/ok", counterNemeses, counterOptions, 0},
		{"ratelimit", "redis", "allow/ok", nil, nil, 0},
		{"register", "postgres", "cas/ok", nil, nil, 0},
		{"register", "mysql", "cas/ok", nil, map[string]string{"sql_mode": "SIMULTANEOUS_ASSIGNMENT"}, 0},
	} {
		for _, unsafe := range []bool{false, true} {
			name := tc.workload + "/" + tc.backend + "/safe"
			if unsafe {
				name = tc.workload + "/" + tc.backend + "/unsafe"
			}
			t.Run(name, func(t *testing.T) {
				ttl := cmp.Or(tc.ttl, 300*time.Millisecond)
				s, err := chaos.Run(t.Context(), &chaos.Config{
					Workload: tc.workload, Backend: tc.backend, Unsafe: unsafe, Endpoints: endpoints(t, tc.backend),
					Duration: 8 * time.Second, TTL: ttl, Seed: 20261207, Out: t.TempDir(),
					Nemeses: tc.nemeses, Options: tc.options,
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Log(s)
				if s.Ops[tc.effect] == 0 || s.Faults[chaos.NemesisPause] == 0 {
					t.Fatalf("no %s or no pause: the run proves nothing\n%s", tc.effect, s)
				}
				if unsafe == s.Report.Valid {
					t.Errorf("verdict %v with unsafe=%v: %+v", s.Report.Valid, unsafe, s.Report.Anomalies)
				}
			})
		}
	}
}

// TestChaosServerFaults runs the fenced counter on a Redis server of its
// own, which the nemesis freezes and kills (a killed Redis forgets every
// lock: the next client takes the lock its holder still believes it has),
// beside client pauses and PostgreSQL sessions terminated under the
// clients. Fencing on: no anomaly; off: the stale holders are found.
func TestChaosServerFaults(t *testing.T) {
	redis := testkit.StartRedis(t, 1)[0]
	for _, unsafe := range []bool{false, true} {
		name := map[bool]string{false: "safe", true: "unsafe"}[unsafe]
		t.Run(name, func(t *testing.T) {
			e := endpoints(t, "postgres")
			e.Redis = redis.Addr
			s, err := chaos.Run(t.Context(), &chaos.Config{
				Workload: "counter", Backend: "redis", Unsafe: unsafe, Endpoints: e,
				Duration: 8 * time.Second, TTL: 300 * time.Millisecond, Seed: 20261207, Out: t.TempDir(),
				Nemeses: []string{chaos.NemesisPause, chaos.NemesisServerPause, chaos.NemesisServerKill, chaos.NemesisTerminate},
				Options: counterOptions,
				Servers: map[string]chaos.Server{"redis": redis},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(s)
			if s.Ops["incr/ok"] == 0 || s.Faults[chaos.NemesisServerKill] == 0 || s.Faults[chaos.NemesisTerminate] == 0 || s.Skipped > 0 {
				t.Fatalf("no increment, no server kill, no terminate or a fault not injected: the run proves nothing\n%s", s)
			}
			if unsafe == s.Report.Valid {
				t.Errorf("verdict %v with unsafe=%v: %+v", s.Report.Valid, unsafe, s.Report.Anomalies)
			}
		})
	}
}

// TestChaosFailover runs the fenced counter on a Redis primary with a
// replica: the nemesis freezes the replica while the primary grants
// locks, kills the primary and promotes the replica, which grants the same
// locks again (the seed's single-Redis failure). Fencing must turn the
// second holder's stale writes away; without it, they land.
func TestChaosFailover(t *testing.T) {
	procs := testkit.StartRedis(t, 2)
	f, err := chaos.NewRedisFailover(t.Context(), testkit.Addrs(procs), []chaos.Server{procs[0], procs[1]})
	if err != nil {
		t.Fatal(err)
	}
	for _, unsafe := range []bool{false, true} {
		name := map[bool]string{false: "safe", true: "unsafe"}[unsafe]
		t.Run(name, func(t *testing.T) {
			e := endpoints(t, "postgres")
			e.Redis = f.Primary()
			s, err := chaos.Run(t.Context(), &chaos.Config{
				Workload: "counter", Backend: "redis", Unsafe: unsafe, Endpoints: e,
				Duration: 8 * time.Second, TTL: 300 * time.Millisecond, Seed: 20261207, Out: t.TempDir(),
				Nemeses: []string{chaos.NemesisFailover}, Options: counterOptions,
				Failovers: map[string]chaos.Failover{"redis": f},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(s)
			if s.Ops["incr/ok"] == 0 || s.Faults[chaos.NemesisFailover] == 0 || s.Skipped > 0 {
				t.Fatalf("no increment, no failover or a failover that failed: the run proves nothing\n%s", s)
			}
			if unsafe == s.Report.Valid {
				t.Errorf("verdict %v with unsafe=%v: %+v", s.Report.Valid, unsafe, s.Report.Anomalies)
			}
		})
	}
}

// TestChaosPartition runs the fenced counter on a 3-member etcd cluster
// whose members live in network namespaces of their own: the nemesis cuts
// one member off from the other two (a leader loses its quorum; clients
// on either side still reach their member) while clients pause. Fencing
// on, no anomaly. There is no negative control here: a cut alone does not
// make a holder write after its lease (its writes go to PostgreSQL, which
// is not cut), and the pauses' negative control is TestChaos's.
func TestChaosPartition(t *testing.T) {
	nn := testkit.StartNetns(t, 3)
	procs := testkit.StartEtcdClusterNetns(t, nn)
	var eps []string
	for _, p := range procs {
		eps = append(eps, "http://"+p.Addr)
	}
	e := endpoints(t, "postgres")
	e.Etcd = eps
	s, err := chaos.Run(t.Context(), &chaos.Config{
		Workload: "counter", Backend: "etcd", Endpoints: e,
		Duration: 10 * time.Second, TTL: time.Second, Seed: 20261207, Out: t.TempDir(),
		Nemeses: []string{chaos.NemesisPartition, chaos.NemesisPause}, Options: counterOptions,
		Partitioner: nn,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s)
	if s.Ops["incr/ok"] == 0 || s.Faults[chaos.NemesisPartition] == 0 || s.Skipped > 0 {
		t.Fatalf("no increment, no partition or a fault not injected: the run proves nothing\n%s", s)
	}
	if !s.Report.Valid {
		t.Errorf("anomalies with fencing on: %+v", s.Report.Anomalies)
	}
}

var (
	counterNemeses = []string{chaos.NemesisPause, chaos.NemesisKill, chaos.NemesisDrop, chaos.NemesisReset}
	counterOptions = map[string]string{"think": "50ms"}
)

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
