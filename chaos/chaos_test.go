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

// TestChaos is the short form of the runs CI makes: the safe run must
// leave no anomaly, and the same seed with the safety mechanism off
// (fencing, the atomic limiter, the version check) must show one — if it
// does not, the run's faults were too weak to mean anything.
func TestChaos(t *testing.T) {
	for _, tc := range []struct {
		workload, backend string
		effect            string // an op kind/outcome the run must have
		nemeses           []string
		options           map[string]string
	}{
		// Counter: pauses are what a missing fence needs, and a think time
		// long enough that a pause usually lands between read and write.
		{"counter", "redis", "incr/ok", counterNemeses, counterOptions},
		{"election", "postgres", "incr/ok", counterNemeses, counterOptions},
		{"semaphore", "postgres", "incr/ok", counterNemeses, counterOptions},
		{"ratelimit", "redis", "allow/ok", nil, nil},
		{"register", "mysql", "cas/ok", nil, map[string]string{"sql_mode": "SIMULTANEOUS_ASSIGNMENT"}},
	} {
		t.Run(tc.workload+"/"+tc.backend, func(t *testing.T) {
			pair(t, func(t *testing.T) *chaos.Config {
				return &chaos.Config{Workload: tc.workload, Backend: tc.backend, Endpoints: endpoints(t, tc.backend),
					Nemeses: tc.nemeses, Options: tc.options}
			}, func(s *chaos.Summary) bool { return s.Ops[tc.effect] > 0 && s.Faults[chaos.NemesisPause] > 0 })
		})
	}
}

// pair runs the Config cfg makes twice side by side, safe and unsafe (8 s,
// TTL 300 ms and the test seed unless cfg says otherwise), and asserts both
// verdicts: no anomaly with the safety mechanism, some without it. proves
// says whether a run did what gives its verdict a meaning (an effect, the
// faults that matter, none left uninjected).
func pair(t *testing.T, cfg func(t *testing.T) *chaos.Config, proves func(*chaos.Summary) bool) {
	for _, unsafe := range []bool{false, true} {
		t.Run(map[bool]string{false: "safe", true: "unsafe"}[unsafe], func(t *testing.T) {
			t.Parallel()
			c := cfg(t)
			c.Unsafe, c.Out = unsafe, t.TempDir()
			c.Duration = cmp.Or(c.Duration, 8*time.Second)
			c.TTL = cmp.Or(c.TTL, 300*time.Millisecond)
			c.Seed = cmp.Or(c.Seed, 20261207)
			s, err := chaos.Run(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(s)
			if !proves(s) || s.Skipped > 0 {
				t.Fatalf("the run proves nothing (an effect or a fault missing, or a fault not injected)\n%s", s)
			}
			if unsafe == s.Report.Valid {
				t.Errorf("verdict %v with unsafe=%v: %+v", s.Report.Valid, unsafe, s.Report.Anomalies)
			}
		})
	}
}

// TestChaosServerFaults runs the fenced counter on a Redis server of its
// own, which the nemesis kills and restarts (a killed Redis forgets every
// lock: the next client takes the lock its holder still believes it has),
// beside client pauses. (Freezing it stalls every client and shows
// little in 12 s; make chaos does both.)
func TestChaosServerFaults(t *testing.T) {
	pair(t, func(t *testing.T) *chaos.Config {
		redis := testkit.StartRedis(t, 1)[0]
		e := endpoints(t, "postgres")
		e.Redis = redis.Addr
		// Holders think up to 1 s, longer than Redis stays down (0.5–1×
		// TTL): a kill then finds the holder still between its read and
		// its write when the restarted server grants the lock again (with
		// 50 ms, holders finished first and one unsafe run in six under
		// -race saw no anomaly).
		return &chaos.Config{Workload: "counter", Backend: "redis", Endpoints: e, Options: map[string]string{"think": "1s"},
			Duration: 12 * time.Second, // a restarting Redis stalls every client
			Nemeses:  []string{chaos.NemesisPause, chaos.NemesisServerKill},
			Servers:  map[string]chaos.Server{"redis": redis}}
	}, func(s *chaos.Summary) bool { return s.Ops["incr/ok"] > 0 && s.Faults[chaos.NemesisServerKill] > 0 })
}

// TestChaosFailover runs the fenced counter on a Redis primary with a
// replica: the nemesis cuts the replica off while the primary grants
// locks, kills the primary and promotes the replica, which grants the same
// locks again (the seed's single-Redis failure). Fencing must turn the
// second holder's stale writes away; without it, they land.
func TestChaosFailover(t *testing.T) {
	pair(t, func(t *testing.T) *chaos.Config {
		procs := testkit.StartRedis(t, 2)
		f, err := chaos.NewRedisFailover(t.Context(), testkit.Addrs(procs), []chaos.Server{procs[0], procs[1]})
		if err != nil {
			t.Fatal(err)
		}
		e := endpoints(t, "postgres")
		e.Redis = f.Primary()
		// A holder thinks up to 200 ms, so that more of them still hold
		// when the promoted replica grants their lock again (8 runs: 9–15
		// anomalies per unsafe run, against 4–11 with 50 ms).
		return &chaos.Config{Workload: "counter", Backend: "redis", Endpoints: e, Options: map[string]string{"think": "200ms"},
			Nemeses: []string{chaos.NemesisFailover}, Failovers: map[string]chaos.Failover{"redis": f}}
	}, func(s *chaos.Summary) bool { return s.Ops["incr/ok"] > 0 && s.Faults[chaos.NemesisFailover] > 0 })
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

// The counter's short runs inject client faults only: network faults at
// the same time cut the connection a resumed holder writes on, so its
// stale write fails anyway and the negative control finds nothing in
// 8 s (the long runs, with every nemesis, find it).
var (
	counterNemeses = []string{chaos.NemesisPause, chaos.NemesisKill}
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
