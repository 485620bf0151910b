package deadlock_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/deadlock"
)

func w(r deadlock.Resource) deadlock.Op { return deadlock.Op{Kind: deadlock.Write, Resource: r} }
func rd(r deadlock.Resource) deadlock.Op {
	return deadlock.Op{Kind: deadlock.Read, Resource: r}
}

// The classic: T1 writes a then b, T2 writes b then a, interleaved.
func crossed() []deadlock.Txn {
	return []deadlock.Txn{
		{ID: 1, Ops: []deadlock.Op{w(1), w(2)}},
		{ID: 2, Ops: []deadlock.Op{w(2), w(1)}},
	}
}

func TestSimulateTwoTransactionDeadlock(t *testing.T) {
	res, err := deadlock.Simulate(t.Context(), crossed(), &deadlock.Options{Trace: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 2 || res.Deadlocks != 1 || res.Aborts.Deadlock != 1 || res.Aborts.Total() != 1 {
		t.Fatalf("committed %d deadlocks %d aborts %+v", res.Committed, res.Deadlocks, res.Aborts)
	}
	if len(res.Graphs) != 1 {
		t.Fatalf("graphs %d", len(res.Graphs))
	}
	g := res.Graphs[0]
	if !slices.Equal(g.Cycle, []deadlock.TxnID{2, 1}) || g.Victim != 2 {
		t.Fatalf("cycle %v victim %d", g.Cycle, g.Victim)
	}
	var b strings.Builder
	if err := res.WriteTrace(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"T2    wait X r1 for [T1]", "T2    deadlock [T2 T1], victim T2", "T2    abort (deadlock)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("trace lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSimulateThreeWayDeadlock(t *testing.T) {
	txns := []deadlock.Txn{
		{ID: 1, Ops: []deadlock.Op{w(1), w(2)}},
		{ID: 2, Ops: []deadlock.Op{w(2), w(3)}},
		{ID: 3, Ops: []deadlock.Op{w(3), rd(1)}},
	}
	res, err := deadlock.Simulate(t.Context(), txns, &deadlock.Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deadlocks != 1 || !slices.Equal(res.Graphs[0].Cycle, []deadlock.TxnID{3, 1, 2}) {
		t.Fatalf("deadlocks %d graphs %+v", res.Deadlocks, res.Graphs)
	}
}

func TestSimulateUpgradeDeadlock(t *testing.T) {
	txns := []deadlock.Txn{
		{ID: 1, Ops: []deadlock.Op{rd(1), w(1)}},
		{ID: 2, Ops: []deadlock.Op{rd(1), w(1)}},
	}
	for _, v := range []deadlock.Victim{deadlock.Youngest, deadlock.LeastWork, deadlock.FewestLocks} {
		res, err := deadlock.Simulate(t.Context(), txns, &deadlock.Options{Victim: v, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Deadlocks != 1 || res.Committed != 2 || res.Graphs[0].Victim != 2 {
			t.Fatalf("%s: deadlocks %d committed %d graphs %+v", v, res.Deadlocks, res.Committed, res.Graphs)
		}
	}
}

// Under the prevention policies the textbook cases end without a deadlock:
// the younger T2 dies (wait-die), is wounded (wound-wait), gives up at once
// (no-wait) or times out.
func TestPreventionTextbookCases(t *testing.T) {
	cases := map[string][]deadlock.Txn{
		"crossed": crossed(),
		"upgrade": {{ID: 1, Ops: []deadlock.Op{rd(1), w(1)}}, {ID: 2, Ops: []deadlock.Op{rd(1), w(1)}}},
	}
	want := map[deadlock.Policy]deadlock.Aborts{
		deadlock.WaitDie:   {Died: 1},
		deadlock.WoundWait: {Wounded: 1},
		deadlock.NoWait:    {NoWait: 1},
		deadlock.Timeout:   {Timeout: 1},
	}
	for name, txns := range cases {
		for p, aborts := range want {
			res, err := deadlock.Simulate(t.Context(), txns, &deadlock.Options{Policy: p, Check: true})
			if err != nil {
				t.Fatalf("%s/%s: %v", name, p, err)
			}
			if res.Deadlocks != 0 || res.Committed != 2 || res.Aborts != aborts {
				t.Errorf("%s/%s: deadlocks %d committed %d aborts %+v, want %+v", name, p, res.Deadlocks, res.Committed, res.Aborts, aborts)
			}
			if p == deadlock.NoWait && res.Waits != 0 {
				t.Errorf("%s/no-wait waited %d times", name, res.Waits)
			}
		}
	}
}

// TestCheckSerializableNeedsHistory: a run simulated without
// Options.History has no history (nil); checking it is ErrNoHistory, not a
// pass — the committed transactions were never looked at. With History, a
// run that committed nothing has an empty history, which passes.
func TestCheckSerializableNeedsHistory(t *testing.T) {
	txns, err := deadlock.Workload{Seed: 3, Transactions: 50, Resources: 5, ReadRatio: 0.5}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	res, err := deadlock.Simulate(t.Context(), txns, &deadlock.Options{Concurrency: 8})
	if err != nil || res.Committed != len(txns) {
		t.Fatalf("Simulate: %d committed, %v", res.Committed, err)
	}
	for name, err := range map[string]error{
		"CheckSerializable(res.History)": deadlock.CheckSerializable(res.History),
		"res.CheckSerializable()":        res.CheckSerializable(),
		"CheckSerializable(nil)":         deadlock.CheckSerializable(nil),
	} {
		if !errors.Is(err, deadlock.ErrNoHistory) || !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s without Options.History, %d transactions committed: %v, want ErrNoHistory", name, res.Committed, err)
		}
	}
	if err := (*deadlock.Result)(nil).CheckSerializable(); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil Result: %v", err)
	}
	res, err = deadlock.Simulate(t.Context(), txns, &deadlock.Options{Concurrency: 8, History: true})
	if err != nil || res.CheckSerializable() != nil || len(res.History) == 0 {
		t.Fatalf("with History: %v, %v (%d ops)", err, res.CheckSerializable(), len(res.History))
	}
	empty, err := deadlock.Simulate(t.Context(), nil, &deadlock.Options{History: true})
	if err != nil || empty.History == nil || empty.CheckSerializable() != nil {
		t.Errorf("no transactions, with History: history %v, %v, %v", empty.History, err, empty.CheckSerializable())
	}
}

func TestCheckSerializable(t *testing.T) {
	op := func(txn deadlock.TxnID, k deadlock.OpKind, r deadlock.Resource) deadlock.HistoryOp {
		return deadlock.HistoryOp{Txn: txn, Kind: k, Resource: r}
	}
	R, W := deadlock.Read, deadlock.Write
	for _, c := range []struct {
		name string
		h    []deadlock.HistoryOp
		want []deadlock.TxnID
	}{
		{"empty", []deadlock.HistoryOp{}, nil},
		{"serial", []deadlock.HistoryOp{op(1, R, 1), op(1, W, 2), op(2, W, 1), op(2, R, 2)}, nil},
		{"shared reads", []deadlock.HistoryOp{op(1, R, 1), op(2, R, 1), op(2, R, 2), op(1, R, 2)}, nil},
		{"lost update", []deadlock.HistoryOp{op(1, R, 1), op(2, R, 1), op(1, W, 1), op(2, W, 1)}, []deadlock.TxnID{1, 2}},
		{"write skew", []deadlock.HistoryOp{op(1, R, 1), op(2, R, 2), op(1, W, 2), op(2, W, 1)}, []deadlock.TxnID{1, 2}},
		{"three", []deadlock.HistoryOp{op(1, W, 1), op(2, W, 1), op(2, W, 2), op(3, R, 2), op(3, W, 3), op(1, R, 3)}, []deadlock.TxnID{1, 2, 3}},
	} {
		err := deadlock.CheckSerializable(c.h)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var nse *deadlock.NotSerializableError
		if !errors.Is(err, deadlock.ErrNotSerializable) || !errors.As(err, &nse) {
			t.Fatalf("%s: err = %v", c.name, err)
		}
		got := slices.Clone(nse.Cycle)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: cycle %v, want members %v", c.name, nse.Cycle, c.want)
		}
	}
}

func TestSimulateDeterministic(t *testing.T) {
	txns, err := deadlock.Workload{Seed: 7, Transactions: 300, Resources: 50, ReadRatio: 0.5, Skew: 0.8}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range deadlock.AllPolicies() {
		opts := &deadlock.Options{Policy: p, Seed: 3, Trace: true, History: true, MaxGraphs: 5}
		a, err := deadlock.Simulate(t.Context(), txns, opts)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := deadlock.Workload{Seed: 7, Transactions: 300, Resources: 50, ReadRatio: 0.5, Skew: 0.8}.Generate()
		b, err := deadlock.Simulate(t.Context(), again, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two runs differ", p)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	for _, wl := range []deadlock.Workload{
		{Transactions: -1}, {ReadRatio: 1.5}, {Resources: 5, HotResources: 6}, {Skew: -1}, {ThinkTime: -1},
	} {
		if _, err := wl.Generate(); !errors.Is(err, deadlock.ErrInvalidWorkload) {
			t.Errorf("%+v: %v", wl, err)
		}
	}
	for _, c := range []struct {
		txns []deadlock.Txn
		opts *deadlock.Options
	}{
		{[]deadlock.Txn{{ID: 0}}, nil},
		{[]deadlock.Txn{{ID: 1}, {ID: 1}}, nil},
		{[]deadlock.Txn{{ID: 1, Ops: []deadlock.Op{{Kind: 9}}}}, nil},
		{nil, &deadlock.Options{Concurrency: -1}},
		{nil, &deadlock.Options{MaxEvents: -1}},
		{nil, &deadlock.Options{MaxRestartDelay: -1}},
		{nil, &deadlock.Options{MaxTime: -1}},
		{nil, &deadlock.Options{Policy: 42}},
	} {
		if _, err := deadlock.Simulate(t.Context(), c.txns, c.opts); !errors.Is(err, deadlock.ErrInvalidWorkload) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if _, err := deadlock.ParsePolicy("nope"); !errors.Is(err, deadlock.ErrInvalidWorkload) {
		t.Error(err)
	}
}

// TestProperties runs many seeded workloads under every policy and checks
// the three properties: (1) no resource is ever held by two incompatible
// transactions, checked independently from the trace's grant/release
// intervals (and by the lock table after every event via Options.Check);
// (2) nobody waits forever: every transaction commits within MaxTime and
// MaxEvents;
// (3) the committed history is conflict-serializable. Prevention policies
// additionally never form a cycle (Options.Check) and no-wait never waits.
func TestProperties(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		wl := deadlock.Workload{
			Seed:         seed,
			Transactions: 60,
			Resources:    int(3 + seed%12),
			Length:       int(2 + seed%5),
			ReadRatio:    float64(seed%4) / 4,
			Skew:         float64(seed%3) * 0.5,
			ArrivalRate:  float64(seed%2) * 20000,
			ThinkTime:    deadlock.Time(seed%3) * 5,
		}
		txns, err := wl.Generate()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range deadlock.AllPolicies() {
			for _, v := range []deadlock.Victim{deadlock.Youngest, deadlock.LeastWork, deadlock.FewestLocks} {
				if v != deadlock.Youngest && p != deadlock.Detect && p != deadlock.DetectPeriodic {
					continue
				}
				name := fmt.Sprintf("seed=%d/%s/%s", seed, p, v)
				res, err := deadlock.Simulate(t.Context(), txns, &deadlock.Options{
					Policy: p, Victim: v, Seed: seed, Concurrency: int(2 + seed%8),
					Trace: true, History: true, Check: true, MaxTime: 10 * deadlock.Second, MaxEvents: 1000000,
				})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if res.Committed != len(txns) {
					t.Fatalf("%s: committed %d of %d", name, res.Committed, len(txns))
				}
				if err := res.CheckSerializable(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if p == deadlock.NoWait && res.Waits != 0 {
					t.Fatalf("%s: no-wait waited", name)
				}
				if p >= deadlock.WaitDie && p <= deadlock.NoWait && res.Deadlocks != 0 {
					t.Fatalf("%s: %d deadlocks", name, res.Deadlocks)
				}
				checkLockIntervals(t, name, res.Trace)
				checkWaitStats(t, name, res)
				wantOps := 0
				for _, tx := range txns {
					for _, op := range tx.Ops {
						if op.Kind != deadlock.Think {
							wantOps++
						}
					}
				}
				if len(res.History) != wantOps {
					t.Fatalf("%s: history has %d ops, want %d", name, len(res.History), wantOps)
				}
			}
		}
	}
}

// checkWaitStats recomputes the lock waits from the trace (a wait lasts
// from the transaction's wait line to its next grant or abort; every other
// request waited 0) and checks Result's streamed MeanWait (exact) and
// P99Wait (nearest rank; exact below 2,048µs, at most 1/1024 high above).
func checkWaitStats(t *testing.T, name string, res *deadlock.Result) {
	t.Helper()
	since := map[deadlock.TxnID]deadlock.Time{}
	var waits []deadlock.Time
	for _, e := range res.Trace {
		switch e.Kind {
		case deadlock.TraceWait:
			since[e.Txn] = e.Time
		case deadlock.TraceGrant, deadlock.TraceAbort:
			if t0, ok := since[e.Txn]; ok {
				waits = append(waits, e.Time-t0)
				delete(since, e.Txn)
			}
		}
	}
	if len(waits) != res.Waits || len(since) != 0 {
		t.Fatalf("%s: trace has %d ended waits (%d open), result %d", name, len(waits), len(since), res.Waits)
	}
	for range res.LockRequests - res.Waits {
		waits = append(waits, 0)
	}
	var sum float64
	for _, w := range waits {
		sum += float64(w)
	}
	slices.Sort(waits)
	mean := deadlock.Time(sum/float64(len(waits)) + 0.5)
	p99 := waits[(len(waits)*99+99)/100-1]
	if res.MeanWait != mean || res.P99Wait < p99 || res.P99Wait-p99 > p99/1024 || (p99 < 2048 && res.P99Wait != p99) {
		t.Fatalf("%s: mean wait %s, p99 %s; the trace gives %s, %s", name, res.MeanWait, res.P99Wait, mean, p99)
	}
}

// checkLockIntervals replays grants and releases (commit/abort) from the
// trace and fails if a grant meets an incompatible lock of another
// transaction.
func checkLockIntervals(t *testing.T, name string, trace []deadlock.TraceEvent) {
	t.Helper()
	held := map[deadlock.Resource]map[deadlock.TxnID]deadlock.Mode{}
	mine := map[deadlock.TxnID][]deadlock.Resource{}
	for _, e := range trace {
		switch e.Kind {
		case deadlock.TraceGrant:
			hs := held[e.Resource]
			if hs == nil {
				hs = map[deadlock.TxnID]deadlock.Mode{}
				held[e.Resource] = hs
			}
			for other, m := range hs {
				if other != e.Txn && (m == deadlock.Exclusive || e.Mode == deadlock.Exclusive) {
					t.Fatalf("%s: t=%s T%d got %s r%d while T%d holds %s", name, e.Time, e.Txn, e.Mode, e.Resource, other, m)
				}
			}
			if hs[e.Txn] != deadlock.Exclusive {
				hs[e.Txn] = e.Mode
			}
			mine[e.Txn] = append(mine[e.Txn], e.Resource)
		case deadlock.TraceCommit, deadlock.TraceAbort:
			for _, r := range mine[e.Txn] {
				delete(held[r], e.Txn)
			}
			delete(mine, e.Txn)
		}
	}
	if len(mine) != 0 {
		t.Fatalf("%s: locks left at the end: %v", name, mine)
	}
}

func TestSimulateCancelled(t *testing.T) {
	txns, err := deadlock.Workload{Seed: 1, Transactions: 100}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := deadlock.Simulate(ctx, txns, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
