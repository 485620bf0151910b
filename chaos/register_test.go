package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/testkit"
)

// Hand-made operations for the checker: times are arbitrary units.

func regRead(p int, key string, call, ret, v int64) Op {
	return Op{Process: p, Kind: "read", Key: key, Call: call, Return: ret, Ret: v, Outcome: OK}
}

func regWrite(p int, key string, call, ret, v int64, o Outcome) Op {
	return Op{Process: p, Kind: "write", Key: key, Call: call, Return: ret, Arg: v, Outcome: o}
}

func regCAS(p int, key string, call, ret, expect, v int64, o Outcome) Op {
	op := Op{Process: p, Kind: "cas", Key: key, Call: call, Return: ret, Expect: expect, Arg: v, Outcome: o}
	if o == Fail {
		op.Err = registerRefused
	}
	return op
}

func TestRegisterCheck(t *testing.T) {
	failed := func(op Op, err string) Op { op.Outcome, op.Err = Fail, err; return op }
	cases := []struct {
		name   string
		ops    []Op
		want   string // "" for valid, else the anomaly kind
		detail string // in the anomaly's detail
	}{
		{name: "sequential", ops: []Op{
			regWrite(1, "k0", 0, 10, 5, OK), regRead(2, "k0", 20, 30, 5),
			regCAS(1, "k0", 40, 50, 5, 7, OK), regRead(2, "k0", 60, 70, 7),
		}},
		{name: "read concurrent with a write sees the old value", ops: []Op{
			regWrite(1, "k0", 0, 30, 5, OK), regRead(2, "k0", 10, 20, 0), regRead(2, "k0", 40, 50, 5),
		}},
		{name: "stale read after a completed write", ops: []Op{
			regWrite(1, "k0", 0, 10, 5, OK), regRead(2, "k0", 20, 30, 0),
		}, want: "nonlinearizable", detail: "key k0: its 2 operations have no linearization; the longest partial one (1 operations) cannot go on with read() → 0 (process 2, "},
		{name: "unknown write observed later", ops: []Op{
			regWrite(1, "k0", 0, 10, 5, Unknown), regRead(2, "k0", 20, 30, 5),
		}},
		{name: "unknown write never observed", ops: []Op{
			regWrite(1, "k0", 0, 10, 5, Unknown), regRead(2, "k0", 20, 30, 0), regRead(2, "k0", 40, 50, 0),
		}},
		{name: "pending write taking effect after a later write", ops: []Op{
			regWrite(1, "k0", 0, 0, 5, Pending), regWrite(2, "k0", 10, 20, 6, OK), regRead(3, "k0", 30, 40, 6), regRead(3, "k0", 50, 60, 5),
		}},
		{name: "unknown write seen then unseen", ops: []Op{
			regWrite(1, "k0", 0, 10, 5, Unknown), regRead(2, "k0", 20, 30, 5), regRead(2, "k0", 40, 50, 0),
		}, want: "nonlinearizable"},
		{name: "lost update", ops: []Op{
			regRead(1, "k0", 0, 5, 0), regRead(2, "k0", 0, 5, 0),
			regCAS(1, "k0", 10, 30, 0, 5, OK), regCAS(2, "k0", 20, 40, 0, 6, OK),
			// Either cas can come first in the longest partial
			// linearization (porcupine's search order varies: CI saw both);
			// the other cannot go on.
		}, want: "nonlinearizable", detail: "cannot go on with cas(0 → "},
		{name: "unknown cas applied", ops: []Op{
			regCAS(1, "k0", 0, 10, 0, 5, Unknown), regRead(2, "k0", 20, 30, 5),
		}},
		{name: "unknown cas that met another value", ops: []Op{
			regWrite(1, "k0", 0, 10, 3, OK), regCAS(2, "k0", 20, 30, 0, 5, Unknown), regRead(1, "k0", 40, 50, 5),
		}, want: "nonlinearizable"},
		{name: "refused cas with a concurrent write", ops: []Op{
			regWrite(1, "k0", 0, 20, 5, OK), regCAS(2, "k0", 10, 30, 0, 6, Fail),
		}},
		{name: "refused cas of an unchanged value", ops: []Op{
			regRead(1, "k0", 0, 10, 0), regCAS(2, "k0", 20, 30, 0, 6, Fail), regRead(1, "k0", 40, 50, 0),
		}, want: "nonlinearizable"},
		{name: "failures carry no information", ops: []Op{
			failed(regRead(1, "k0", 0, 10, 9), "timeout"),
			failed(regWrite(1, "k0", 20, 30, 7, OK), "deadlock"),
			failed(regCAS(2, "k0", 20, 30, 0, 8, OK), "serialization failure"),
			regRead(1, "k0", 40, 50, 0),
		}},
		{name: "keys are independent", ops: []Op{
			regWrite(1, "k0", 0, 10, 5, OK), regRead(2, "k1", 20, 30, 0), regRead(2, "k0", 20, 30, 5),
		}},
		{name: "the bad key is named", ops: []Op{
			regWrite(1, "k0", 0, 10, 5, OK), regWrite(1, "k1", 20, 30, 6, OK), regRead(2, "k1", 40, 50, 0), regRead(2, "k0", 40, 50, 5),
		}, want: "nonlinearizable", detail: "key k1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := checkRegister(tc.ops, 10*time.Second, "")
			switch {
			case tc.want == "" && !r.Valid:
				t.Fatalf("want valid, got %+v", r)
			case tc.want != "" && r.Counts[tc.want] == 0:
				t.Fatalf("want %s, got %+v", tc.want, r)
			case tc.want != "" && len(r.Counts) != 1:
				t.Fatalf("want only %s, got %+v", tc.want, r)
			case tc.detail != "" && !strings.Contains(r.Anomalies[0].Detail, tc.detail):
				t.Fatalf("detail %q does not name %q", r.Anomalies[0].Detail, tc.detail)
			}
		})
	}
}

func TestRegisterCheckNotes(t *testing.T) {
	ops := []Op{
		regWrite(1, "k0", 0, 10, 5, Unknown), regWrite(2, "k0", 0, 0, 6, Pending),
		regCAS(3, "k0", 0, 10, 0, 7, Fail), regRead(4, "k0", 20, 30, 5),
	}
	r := checkRegister(ops, 10*time.Second, "")
	if !r.Valid {
		t.Fatalf("want valid, got %+v", r)
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "2 ambiguous") || !strings.Contains(notes, "1 refused") {
		t.Fatalf("notes %q", r.Notes)
	}
}

func TestRegisterCheckVisualisation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	ops := []Op{regWrite(1, "k2", 0, 10, 5, OK), regRead(2, "k2", 20, 30, 0)}
	r := checkRegister(ops, 10*time.Second, dir)
	if r.Counts["nonlinearizable"] != 1 {
		t.Fatalf("want nonlinearizable, got %+v", r)
	}
	path := filepath.Join(dir, "register-k2.html")
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("visualisation: %v", err)
	}
	if !strings.Contains(r.Anomalies[0].Detail, path) {
		t.Fatalf("detail %q does not point at %s", r.Anomalies[0].Detail, path)
	}
}

// A check that runs out of time proves nothing: the key is "unchecked"
// and the report is not valid.
func TestRegisterCheckTimeout(t *testing.T) {
	var ops []Op
	for i := range int64(20000) {
		ops = append(ops, regWrite(1, "k0", 20*i, 20*i+5, i+1, OK), regRead(2, "k0", 20*i+10, 20*i+15, i+1))
	}
	r := checkRegister(ops, time.Nanosecond, "")
	if r.Valid || r.Counts["unchecked"] != 1 || !strings.Contains(strings.Join(r.Notes, "\n"), "timed out") {
		t.Fatalf("want unchecked, got %+v", r)
	}
}

func TestRegisterOptions(t *testing.T) {
	o, err := parseRegisterOptions(map[string]string{
		"keys": "5", "isolation": "repeatable-read", "sql_mode": "simultaneous_assignment, ANSI_QUOTES",
		"interpolateParams": "true", "clientFoundRows": "false", "check_timeout": "2s", "out": "/tmp/x", "other": "ignored",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.keys != 5 || o.isolation.String() != "Repeatable Read" || strings.Join(o.mysql.sqlModes, ",") != "SIMULTANEOUS_ASSIGNMENT,ANSI_QUOTES" ||
		!*o.mysql.interpolate || *o.mysql.clientFoundRows || o.checkTimeout != 2*time.Second || o.out != "/tmp/x" {
		t.Fatalf("parsed %+v", o)
	}
	for _, bad := range []map[string]string{
		{"keys": "0"}, {"keys": "x"}, {"isolation": "snapshot"}, {"sql_mode": "A'B"},
		{"interpolateParams": "yes please"}, {"check_timeout": "-1s"}, {"sdk_retries": "maybe"},
	} {
		if _, err := parseRegisterOptions(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: got %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// historyWriter feeds a client's event lines into a History, as the
// crew does with a client process's standard output.
type historyWriter struct{ h *History }

func (w historyWriter) Write(p []byte) (int, error) {
	var op Op
	if err := json.Unmarshal(p, &op); err != nil {
		return 0, err
	}
	w.h.Add(op)
	return len(p), nil
}

// registerRun is one integration run of the register workload.
type registerRun struct {
	name    string
	unsafe  bool
	options map[string]string
}

const (
	registerTestClients  = 6
	registerTestDuration = 1500 * time.Millisecond
)

// testRegister runs each of runs against backend at eps, without faults,
// with client loops as goroutines: a safe run must be linearizable, an
// unsafe one (a cas without its check) must not.
func testRegister(t *testing.T, backend string, eps Endpoints, runs []registerRun) {
	t.Helper()
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			e := env{Workload: "register", Backend: backend, Unsafe: run.unsafe, Run: testkit.Name("chaos_"),
				Seed: 1, TTL: 500 * time.Millisecond, Endpoints: eps, Options: run.options}
			r := runRegister(t, &e, registerTestClients, registerTestDuration)
			switch {
			case run.unsafe && r.Counts["nonlinearizable"] == 0:
				t.Fatalf("the negative control passed: %+v", r)
			case !run.unsafe && !r.Valid:
				t.Fatalf("safe run not valid: %+v", r)
			}
		})
	}
}

// runRegister sets up e, runs clients client loops for d, checks the
// history and returns the report.
func runRegister(t *testing.T, e *env, clients int, d time.Duration) *Report {
	t.Helper()
	w := registerWorkload{}
	if err := w.setup(t.Context(), e); err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.teardown(ctx, e); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	var h History
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i := range clients {
		c := &client{env: *e, process: i + 1, out: historyWriter{&h}, rng: rand.New(rand.NewPCG(e.Seed, uint64(i+1)))}
		wg.Go(func() { errs[i] = w.client(ctx, c) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("client: %v", err)
	}
	ops := h.Ops()
	start := time.Now()
	r, err := w.check(t.Context(), e, ops)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	byOutcome := map[string]int{}
	for _, op := range ops {
		byOutcome[op.Kind+"/"+op.Outcome.String()]++
	}
	t.Logf("%d ops (%s); check took %s; anomalies %s; notes %q", len(ops), counts(byOutcome),
		time.Since(start).Round(time.Millisecond), counts(r.Counts), r.Notes)
	if len(r.Anomalies) > 0 {
		t.Logf("first anomaly: %s", r.Anomalies[0].Detail)
	}
	return r
}

func TestRegisterPostgres(t *testing.T) {
	t.Parallel()
	testRegister(t, "postgres", Endpoints{Postgres: testkit.PostgresURL(t)}, []registerRun{
		{name: "safe"},
		{name: "safe/repeatable-read", options: map[string]string{"isolation": "repeatable-read"}},
		{name: "unsafe", unsafe: true},
	})
}

func TestRegisterMySQL(t *testing.T) {
	t.Parallel()
	testRegister(t, "mysql", Endpoints{MySQL: testkit.MySQLDSN(t)}, []registerRun{
		{name: "safe"},
		{name: "safe/options", options: map[string]string{"isolation": "read-committed",
			"sql_mode": "SIMULTANEOUS_ASSIGNMENT", "interpolateParams": "true", "clientFoundRows": "true"}},
		// READ COMMITTED: MariaDB 11.6+ under REPEATABLE READ refuses the
		// blind write of a row changed since the snapshot (1020), so the
		// negative control would lose no update there.
		{name: "unsafe", unsafe: true, options: map[string]string{"isolation": "read-committed"}},
	})
}

func TestRegisterDynamoDB(t *testing.T) {
	t.Parallel()
	testRegister(t, "dynamodb", Endpoints{DynamoDB: testkit.DynamoDBEndpoint(t)}, []registerRun{
		{name: "safe"},
		{name: "unsafe", unsafe: true},
	})
}

// A DSN that names no database uses concurkit_chaos, created by setup;
// sql_mode reaches every session.
func TestRegisterMySQLSession(t *testing.T) {
	t.Parallel()
	e := &env{Backend: "mysql", Run: testkit.Name("chaos_"), TTL: 500 * time.Millisecond,
		Endpoints: Endpoints{MySQL: testkit.MySQLServerDSN(t)}, Options: map[string]string{"sql_mode": "SIMULTANEOUS_ASSIGNMENT", "keys": "1"}}
	w := registerWorkload{}
	ctx := t.Context()
	if err := w.setup(ctx, e); err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() {
		if err := w.teardown(context.Background(), e); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	o, _ := parseRegisterOptions(e.Options)
	st, err := openRegisterMySQL(e, o, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var db, mode string
	if err := st.db.QueryRowContext(ctx, "SELECT DATABASE(), @@SESSION.sql_mode").Scan(&db, &mode); err != nil {
		t.Fatal(err)
	}
	if db != registerDatabase || !strings.Contains(mode, "SIMULTANEOUS_ASSIGNMENT") {
		t.Fatalf("database %q, sql_mode %q", db, mode)
	}
	if v, err := st.read(ctx, registerKey(0)); err != nil || v != 0 {
		t.Fatalf("read: %d, %v", v, err)
	}
}
