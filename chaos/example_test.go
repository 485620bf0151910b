package chaos_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit/chaos"
	"github.com/concurkit/concurkit/testkit"
)

// A short fenced-counter run on the single Redis server, every nemesis
// on. The test binary is the client process (see TestMain in
// main_test.go).
func ExampleRun() {
	s, err := chaos.Run(context.Background(), &chaos.Config{
		Workload: "counter",
		Backend:  "redis",
		Duration: 3 * time.Second,
		TTL:      300 * time.Millisecond,
		Seed:     42,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("increments acknowledged:", s.Ops["incr/ok"] > 0)
	fmt.Println("valid:", s.Report.Valid)
	// Output:
	// increments acknowledged: true
	// valid: true
}

// A history records an invocation as Pending and completes it later; an
// operation whose client died stays Pending.
func ExampleHistory() {
	var h chaos.History
	h.Add(chaos.Op{Process: 1, Seq: 1, Kind: "write", Key: "x", Arg: 5, Call: 100})
	h.Add(chaos.Op{Process: 2, Seq: 1, Kind: "read", Key: "x", Call: 110})
	h.Add(chaos.Op{Process: 1, Seq: 1, Kind: "write", Key: "x", Arg: 5, Call: 100, Return: 120, Outcome: chaos.OK})
	for _, op := range h.Ops() {
		fmt.Println(op.Process, op.Kind, op.Outcome, op.Outcome.Ambiguous())
	}
	// Output:
	// 1 write ok false
	// 2 read pending true
}

// Histories are JSON lines: WriteHistory writes them, ReadHistory reads
// them back (or a client's raw stream, completions after invocations).
func ExampleReadHistory() {
	stream := `{"process":1,"seq":1,"kind":"incr","token":7,"arg":3,"call":1,"outcome":"pending"}
{"process":1,"seq":1,"kind":"incr","token":7,"arg":3,"call":1,"return":2,"outcome":"unknown","err":"timeout"}
`
	ops, err := chaos.ReadHistory(strings.NewReader(stream))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = chaos.WriteHistory(os.Stdout, ops)
	// Output:
	// {"process":1,"seq":1,"kind":"incr","token":7,"arg":3,"call":1,"return":2,"outcome":"unknown","err":"timeout"}
}

// A program that runs chaos.Run must let its client processes in first.
func ExampleIsWorker() {
	if chaos.IsWorker() {
		os.Exit(chaos.WorkerMain())
	}
	fmt.Println("controller")
	// Output: controller
}

// The endpoints come from the environment scripts/services.sh env prints.
func ExampleEndpointsFromEnv() {
	e := chaos.EndpointsFromEnv()
	fmt.Println(e.Postgres != "", len(e.Redlock) > 0)
	// Output: true true
}

// Summary.String is what `concurkit chaos` prints.
func ExampleSummary_String() {
	s := &chaos.Summary{Workload: "counter", Backend: "etcd", Unsafe: true, Seed: 7, Duration: 10 * time.Second, Workers: 5,
		Ops:    map[string]int{"incr/ok": 695},
		Faults: map[string]int{"pause": 3},
		Report: &chaos.Report{Counts: map[string]int{"lost-update": 8}}}
	fmt.Print(s)
	// Output:
	// chaos counter on etcd, unsafe (negative control): 5 clients, 10s, seed 7
	//   operations: incr/ok 695
	//   faults:     pause 3
	//   anomalies:  lost-update 8
	//   verdict:    INVALID
}

// Server faults on processes a run may break: a server scripts/services.sh
// started, known by its pid file. With Addr and Reexec a killed server is
// run again as it ran, its data kept.
func ExamplePidFileServer() {
	pg := &chaos.PidFileServer{PidFile: "/tmp/concurkit/run/pg.pid", Reexec: true, Addr: "127.0.0.1:15432"}
	cfg := &chaos.Config{
		Workload: "register", Backend: "postgres",
		Nemeses: []string{chaos.NemesisServerPause, chaos.NemesisServerKill},
		Servers: map[string]chaos.Server{"pg": pg},
	}
	fmt.Println(cfg.Servers["pg"].(*chaos.PidFileServer).CanRestart())
	// Output: true
}

// A Redis primary and its replica, failed over by the nemesis: the
// replica misses the primary's last locks and grants them again.
func ExampleNewRedisFailover() {
	_ = func(ctx context.Context, primary, replica *testkit.Proc, pgURL string) (*chaos.Summary, error) {
		f, err := chaos.NewRedisFailover(ctx, []string{primary.Addr, replica.Addr}, []chaos.Server{primary, replica})
		if err != nil {
			return nil, err
		}
		return chaos.Run(ctx, &chaos.Config{
			Workload: "counter", Backend: "redis",
			Endpoints: &chaos.Endpoints{Postgres: pgURL, Redis: f.Primary()},
			Nemeses:   []string{chaos.NemesisFailover, chaos.NemesisPause},
			Failovers: map[string]chaos.Failover{"redis": f},
		})
	}
}

// A PostgreSQL primary and its synchronous standby, failed over in the
// middle of the idempotent-HTTP run: no acknowledged response may be lost.
func ExampleNewPostgresFailover() {
	_ = func(t *testing.T) {
		nodes := testkit.StartPostgresReplication(t, true)
		var pn []chaos.PostgresNode
		for _, n := range nodes {
			pn = append(pn, chaos.PostgresNode{URL: n.URL(), Server: n, Rejoin: n.Rejoin})
		}
		f, err := chaos.NewPostgresFailover(pn)
		if err != nil {
			t.Fatal(err)
		}
		s, err := chaos.Run(t.Context(), &chaos.Config{
			Workload: "idempotent", Backend: "postgres",
			Endpoints: &chaos.Endpoints{Postgres: nodes[0].URL()},
			Nemeses:   []string{chaos.NemesisFailover},
			Failovers: map[string]chaos.Failover{"postgres": f},
		})
		if err != nil || !s.Report.Valid {
			t.Fatal(s, err)
		}
	}
}

// Partitions need servers in network namespaces of their own.
func ExamplePartitioner() {
	_ = func(t *testing.T) {
		nn := testkit.StartNetns(t, 3)
		members := testkit.StartEtcdClusterNetns(t, nn)
		eps := []string{"http://" + members[0].Addr, "http://" + members[1].Addr, "http://" + members[2].Addr}
		_, _ = chaos.Run(t.Context(), &chaos.Config{
			Workload: "counter", Backend: "etcd",
			Endpoints:   &chaos.Endpoints{Postgres: testkit.PostgresServerURL(t), Etcd: eps},
			Nemeses:     []string{chaos.NemesisPartition, chaos.NemesisPause},
			Partitioner: nn,
		})
	}
}
