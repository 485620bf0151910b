package chaos

import (
	"errors"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/concurkit/concurkit/saga"
)

// TestCheckSaga feeds the checker hand-made histories and effect rows: one
// it must accept — a takeover that repeats an interrupted step, within the
// at-least-once allowance — then one anomaly each.
func TestCheckSaga(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	act := func(key string, step, p int, run int64, attempt, start, end int) sagaEffect {
		return sagaEffect{key, step, sagaAction, p, run, attempt, ms(start), ms(end)}
	}
	comp := func(key string, step, p int, run int64, attempt, start, end int) sagaEffect {
		return sagaEffect{key, step, sagaCompensation, p, run, attempt, ms(start), ms(end)}
	}
	runOp := func(kind, key string, p int, seq int64, o Outcome, ret int64, call, end int) Op {
		return Op{Kind: kind, Key: key, Process: p, Seq: seq, Outcome: o, Ret: ret, Call: ms(call), Return: ms(end), Arg: 1}
	}
	ops := []Op{
		runOp("saga", "s1", 1, 1, OK, sagaCompleted, 0, 35),
		runOp("saga", "s1", 2, 1, Fail, 0, 1, 2),
		// s2 fails at step 3: process 2 executes step 1 and stops before
		// recording it (killed); process 3's recovery runs it again,
		// step 2, and the compensations.
		runOp("saga", "s2", 2, 2, Pending, 0, 0, 0),
		runOp("recover", "s2", 3, 1, OK, sagaCompensated, 45, 95),
		{Kind: "saga", Key: "s2", Process: 4, Seq: 1, Outcome: OK, Ret: sagaCompensated, Call: ms(96), Return: ms(97)}, // a replay
		runOp("saga", "s3", 1, 2, Unknown, 0, 40, 60),
	}
	effects := []sagaEffect{
		act("s1", 1, 1, 1, 1, 0, 10), act("s1", 2, 1, 1, 1, 10, 20), act("s1", 3, 1, 1, 1, 20, 30),
		act("s2", 1, 2, 2, 1, 0, 10),
		act("s2", 1, 3, 1, 2, 50, 60), act("s2", 2, 3, 1, 1, 60, 70), comp("s2", 2, 3, 1, 1, 70, 80), comp("s2", 1, 3, 1, 2, 80, 90),
		act("s3", 1, 1, 2, 1, 41, 50),
	}
	status := map[string]saga.Status{"s1": saga.Completed, "s2": saga.Compensated, "s3": saga.Running}
	without := func(drop int) []sagaEffect { return slices.Delete(slices.Clone(effects), drop, drop+1) }
	with := func(extra ...sagaEffect) []sagaEffect { return append(slices.Clone(effects), extra...) }
	withStatus := func(key string, st saga.Status) map[string]saga.Status {
		m := maps.Clone(status)
		m[key] = st
		return m
	}
	for _, tc := range []struct {
		name    string
		ops     []Op
		effects []sagaEffect
		status  map[string]saga.Status
		want    []string
	}{
		{"valid", ops, effects, status, nil},
		{"valid negative control", ops, effects, nil, nil},
		{"same attempt twice", ops, append(without(4), act("s2", 1, 3, 1, 1, 50, 60)), status, []string{"duplicate-step"}},
		{"repeated after its run went on", ops, with(act("s2", 2, 2, 2, 1, 10, 20)), status, []string{"duplicate-step"}},
		{"executed after the outcome", ops, with(act("s1", 1, 2, 5, 2, 40, 45)), status, []string{"duplicate-step"}},
		{"compensation repeated after its run went on", ops, with(comp("s2", 2, 4, 2, 1, 91, 93)), status, []string{"duplicate-compensation"}},
		{"compensation after the outcome", ops, with(comp("s2", 1, 4, 2, 2, 100, 110)), status, []string{"duplicate-compensation"}},
		{"overlap", ops, with(act("s3", 1, 2, 3, 2, 45, 55)), status, []string{"concurrent-step"}},
		{"missing compensation", ops, without(7), status, []string{"missing-compensation"}},
		{"missing step", ops, without(2), status, []string{"missing-step"}},
		{"stored compensated, run completed", ops, effects, withStatus("s1", saga.Compensated), []string{"compensated-and-completed"}},
		{"completed with a compensation", ops, with(comp("s1", 3, 1, 1, 1, 30, 34)), status, []string{"compensated-and-completed"}},
		{"lost outcome", ops, effects, withStatus("s1", saga.Running), []string{"lost-outcome"}},
	} {
		r := checkSaga(tc.ops, tc.effects, tc.status)
		got := slices.Sorted(maps.Keys(r.Counts))
		if !slices.Equal(got, tc.want) || r.Valid != (len(tc.want) == 0) {
			t.Errorf("%s: anomalies %v (valid %v), want %v\n%+v", tc.name, got, r.Valid, tc.want, r.Anomalies)
		}
	}
}

// TestSagaFailingStep: the share of failing sagas follows the option, half
// at each of steps 2 and 3, and a key always gets the same answer.
func TestSagaFailingStep(t *testing.T) {
	const n = 20000
	byStep := map[int]int{}
	for i := range n {
		byStep[sagaFailingStep(sagaKey(i), 0.3)]++
	}
	for step, want := range map[int]float64{0: 0.7, 2: 0.15, 3: 0.15} {
		if got := float64(byStep[step]) / n; math.Abs(got-want) > 0.02 {
			t.Errorf("step %d fails %.3f of the sagas, want %.2f", step, got, want)
		}
	}
	if sagaFailingStep("s7", 0.3) != sagaFailingStep("s7", 0.3) || sagaFailingStep("s7", 0) != 0 {
		t.Error("the failing step is not a function of the key and the share")
	}
}

// TestSagaOptions: bad option values are ErrInvalidConfig.
func TestSagaOptions(t *testing.T) {
	o, err := parseSagaOptions(map[string]string{"fail": "0.5", "long": "0", "cancel": "1", "sql_mode": "simultaneous_assignment"})
	if err != nil || o.fail != 0.5 || o.long != 0 || o.cancel != 1 || !slices.Equal(o.mysql.sqlModes, []string{"SIMULTANEOUS_ASSIGNMENT"}) {
		t.Fatalf("%+v, %v", o, err)
	}
	for _, m := range []map[string]string{{"fail": "2"}, {"long": "-0.1"}, {"cancel": "often"}, {"sql_mode": "A; DROP"}} {
		if _, err := parseSagaOptions(m); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: %v, want ErrInvalidConfig", m, err)
		}
	}
}

// TestSaga is the short form of the saga runs: with every nemesis, the
// saga package must leave no anomaly while instances change hands (runs
// of the recovery job that executed steps), on PostgreSQL and on MariaDB
// under SIMULTANEOUS_ASSIGNMENT (where its claim once let two runners in);
// the same seed without the claim and lease must show steps executed
// twice.
func TestSaga(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql"} {
		var options map[string]string
		if backend == "mysql" {
			options = map[string]string{"sql_mode": "SIMULTANEOUS_ASSIGNMENT"}
		}
		t.Run(backend, func(t *testing.T) { // safe and unsafe side by side
			bothWays(t, func(t *testing.T, unsafe bool) {
				s, err := Run(t.Context(), &Config{
					Workload: "saga", Backend: backend, Unsafe: unsafe, Endpoints: idemEndpoints(t, backend),
					Duration: 8 * time.Second, TTL: 300 * time.Millisecond, Seed: 20261207, Out: t.TempDir(), Options: options,
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Log(s)
				if s.Ops["saga/ok"] == 0 || s.Faults[NemesisPause] == 0 {
					t.Fatalf("no saga finished or no pause: the run proves nothing\n%s", s)
				}
				checkVerdict(t, s, unsafe, "the saga's lease", "duplicate-step", false)
				if !unsafe && s.Ops["recover/ok"] == 0 {
					t.Errorf("no instance was resumed by another runner: the run proves little\n%s", s)
				}
			})
		})
	}
}
