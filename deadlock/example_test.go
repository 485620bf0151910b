package deadlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/concurkit/concurkit/deadlock"
)

// Two transactions lock two rows in opposite orders: the textbook deadlock.
func ExampleLockManager() {
	var m deadlock.LockManager // the zero value is ready to use
	m.Acquire(1, 100, deadlock.Exclusive)
	m.Acquire(2, 200, deadlock.Exclusive)
	st, _ := m.Acquire(1, 200, deadlock.Exclusive)
	fmt.Println("T1 wants r200:", st, "blocked by", m.Blockers(1))
	st, _ = m.Acquire(2, 100, deadlock.Exclusive)
	fmt.Println("T2 wants r100:", st, "cycle", m.FindCycle(2))
	// Abort T2 (the victim): its locks go, and T1's wait is granted.
	fmt.Println("abort T2 grants", m.Release(2))
	// Output:
	// T1 wants r200: waiting blocked by [2]
	// T2 wants r100: waiting cycle [2 1]
	// abort T2 grants [{1 200 X}]
}

// Two readers both upgrading to a writer deadlock.
func ExampleLockManager_FindCycle() {
	var m deadlock.LockManager
	m.Acquire(1, 7, deadlock.Shared)
	m.Acquire(2, 7, deadlock.Shared)
	m.Acquire(1, 7, deadlock.Exclusive) // upgrade: waits for T2's S lock
	fmt.Println(m.FindCycle(1))
	m.Acquire(2, 7, deadlock.Exclusive) // upgrade: waits for T1's S lock
	fmt.Println(m.FindCycle(2))
	// Output:
	// []
	// [2 1]
}

// A waiting writer blocks readers that come after it (FIFO), so writers do
// not starve.
func ExampleLockManager_Queue() {
	var m deadlock.LockManager
	m.Acquire(1, 5, deadlock.Shared)
	m.Acquire(2, 5, deadlock.Exclusive)
	st, _ := m.Acquire(3, 5, deadlock.Shared)
	fmt.Println("T3:", st)
	fmt.Println("holders", m.Holders(5), "queue", m.Queue(5))
	fmt.Println("T1 commits, grants", m.Release(1))
	fmt.Println("T2 commits, grants", m.Release(2))
	// Output:
	// T3: waiting
	// holders [{1 S}] queue [{2 X} {3 S}]
	// T1 commits, grants [{2 5 X}]
	// T2 commits, grants [{3 5 S}]
}

// TryAcquire is the no-wait policy's primitive: it never queues.
func ExampleLockManager_TryAcquire() {
	var m deadlock.LockManager
	ok, _ := m.TryAcquire(1, 9, deadlock.Exclusive)
	fmt.Println(ok)
	ok, _ = m.TryAcquire(2, 9, deadlock.Shared)
	fmt.Println(ok, m.Queue(9))
	_, err := m.Acquire(2, 9, 0)
	fmt.Println(errors.Is(err, deadlock.ErrInvalidMode))
	// Output:
	// true
	// false []
	// true
}

// The wait-for graph as Graphviz DOT, the cycle in red.
func ExampleWaitForGraph_WriteDOT() {
	var m deadlock.LockManager
	m.Acquire(1, 1, deadlock.Exclusive)
	m.Acquire(2, 2, deadlock.Exclusive)
	m.Acquire(1, 2, deadlock.Exclusive)
	m.Acquire(2, 1, deadlock.Shared)
	g := m.Graph()
	g.Cycle, g.Victim = m.FindCycle(2), 2
	g.WriteDOT(os.Stdout)
	// Output:
	// digraph waitfor {
	//   label="wait-for graph at t=0s";
	//   rankdir=LR;
	//   node [shape=circle, fontname="Helvetica"];
	//   edge [fontname="Helvetica", fontsize=10];
	//   T1 [color=red, penwidth=2];
	//   T2 [color=red, penwidth=2, style=filled, fillcolor="#ffcccc", xlabel="victim"];
	//   T1 -> T2 [label="r2 X", color=red, penwidth=2.5];
	//   T2 -> T1 [label="r1 S", color=red, penwidth=2.5];
	// }
}

// A seeded workload: the same seed always gives the same scripts.
func ExampleWorkload_Generate() {
	txns, err := deadlock.Workload{Seed: 42, Transactions: 2, Resources: 10, Length: 3, ReadRatio: 0.5}.Generate()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range txns {
		fmt.Print("T", t.ID, ":")
		for _, op := range t.Ops {
			fmt.Print(" ", op.Kind, "(r", op.Resource, ")")
		}
		fmt.Println()
	}
	_, err = deadlock.Workload{ReadRatio: 2}.Generate()
	fmt.Println(errors.Is(err, deadlock.ErrInvalidWorkload))
	// Output:
	// T1: write(r8) read(r0) read(r9)
	// T2: write(r8) write(r2) write(r7)
	// true
}

// One run of the simulator, with the trace of the schedule.
func ExampleSimulate() {
	txns := []deadlock.Txn{
		{ID: 1, Ops: []deadlock.Op{{Kind: deadlock.Write, Resource: 1}, {Kind: deadlock.Write, Resource: 2}}},
		{ID: 2, Ops: []deadlock.Op{{Kind: deadlock.Write, Resource: 2}, {Kind: deadlock.Write, Resource: 1}}},
	}
	res, err := deadlock.Simulate(context.Background(), txns, &deadlock.Options{Trace: true}) // detection, youngest victim
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("committed %d, aborted %d, deadlocks %d, elapsed %s\n", res.Committed, res.Aborts.Total(), res.Deadlocks, res.Elapsed)
	res.WriteTrace(os.Stdout)
	// Output:
	// committed 2, aborted 1, deadlocks 1, elapsed 106µs
	// t=0s        T1    start
	// t=0s        T1    lock X r1
	// t=0s        T2    start
	// t=0s        T2    lock X r2
	// t=10µs      T1    wait X r2 for [T2]
	// t=10µs      T2    wait X r1 for [T1]
	// t=10µs      T2    deadlock [T2 T1], victim T2
	// t=10µs      T2    abort (deadlock)
	// t=10µs      T1    lock X r2
	// t=20µs      T1    commit
	// t=86µs      T2    lock X r2
	// t=96µs      T2    lock X r1
	// t=106µs     T2    commit
}

// Every policy on the same seeded workload.
func ExampleSimulate_compare() {
	txns, _ := deadlock.Workload{Seed: 1, Transactions: 500, Resources: 50, ReadRatio: 0.5}.Generate()
	for _, p := range deadlock.AllPolicies() {
		res, err := deadlock.Simulate(context.Background(), txns, &deadlock.Options{Policy: p, Concurrency: 16, History: true})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-15s committed %d aborted %4d deadlocks %3d serializable %v\n",
			p, res.Committed, res.Aborts.Total(), res.Deadlocks, res.CheckSerializable() == nil)
	}
	// Output:
	// detect          committed 500 aborted  831 deadlocks 831 serializable true
	// detect-periodic committed 500 aborted  965 deadlocks 965 serializable true
	// wait-die        committed 500 aborted 1807 deadlocks   0 serializable true
	// wound-wait      committed 500 aborted 1518 deadlocks   0 serializable true
	// no-wait         committed 500 aborted 1775 deadlocks   0 serializable true
	// timeout         committed 500 aborted  802 deadlocks   0 serializable true
}

// A run can be bounded: Options.MaxEvents (or MaxTime) stops it with
// ErrLimit and returns what it did so far. Here lock timeouts on a hot spot
// whose restart delays are kept from growing (MaxRestartDelay) thrash.
func ExampleSimulate_limit() {
	txns, _ := deadlock.Workload{Seed: 1, Transactions: 2000, ReadRatio: 0.5, HotResources: 10}.Generate()
	res, err := deadlock.Simulate(context.Background(), txns, &deadlock.Options{
		Policy: deadlock.Timeout, Concurrency: 32,
		MaxRestartDelay: 200 * deadlock.Microsecond, // a fixed [0, 200µs] window
		MaxEvents:       100000,
	})
	fmt.Println(errors.Is(err, deadlock.ErrLimit))
	fmt.Println(err)
	fmt.Printf("%d events, %d lock requests, %d aborts, %d committed\n", res.Events, res.LockRequests, res.Aborts.Total(), res.Committed)
	// With the default, growing backoff the same workload completes.
	res, err = deadlock.Simulate(context.Background(), txns, &deadlock.Options{Policy: deadlock.Timeout, Concurrency: 32, MaxEvents: 100000})
	fmt.Println(err, res.Events, "events,", res.Committed, "committed")
	// Output:
	// true
	// deadlock: simulation limit reached: MaxEvents (100000) reached at t=1.348652s with 83 of 2000 transactions committed
	// 100000 events, 55385 lock requests, 30184 aborts, 83 committed
	// <nil> 64937 events, 2000 committed
}

// A lost update is not conflict-serializable.
func ExampleCheckSerializable() {
	h := []deadlock.HistoryOp{
		{Txn: 1, Kind: deadlock.Read, Resource: 1},
		{Txn: 2, Kind: deadlock.Read, Resource: 1},
		{Txn: 1, Kind: deadlock.Write, Resource: 1},
		{Txn: 2, Kind: deadlock.Write, Resource: 1},
	}
	err := deadlock.CheckSerializable(h)
	fmt.Println(err)
	fmt.Println(errors.Is(err, deadlock.ErrNotSerializable))
	fmt.Println(deadlock.CheckSerializable(h[:3]))
	// Output:
	// deadlock: history is not conflict-serializable: precedence cycle [T1 T2]
	// true
	// <nil>
}

// Check a run: its committed history must be recorded (Options.History),
// or there is nothing to check — an error, not a pass.
func ExampleResult_CheckSerializable() {
	txns, _ := deadlock.Workload{Seed: 1, Transactions: 100, Resources: 10, ReadRatio: 0.5}.Generate()
	res, err := deadlock.Simulate(context.Background(), txns, &deadlock.Options{Concurrency: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.CheckSerializable())
	res, err = deadlock.Simulate(context.Background(), txns, &deadlock.Options{Concurrency: 8, History: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.CheckSerializable())
	// Output:
	// deadlock: no history recorded: the run committed 100 transactions without recording them (set Options.History)
	// <nil>
}

func ExampleParsePolicy() {
	var names []string
	for _, p := range deadlock.AllPolicies() {
		q, _ := deadlock.ParsePolicy(p.String())
		names = append(names, q.String())
	}
	fmt.Println(strings.Join(names, " "))
	_, err := deadlock.ParsePolicy("optimistic")
	fmt.Println(err)
	// Output:
	// detect detect-periodic wait-die wound-wait no-wait timeout
	// deadlock: invalid workload: unknown policy "optimistic"
}

func ExampleParseVictim() {
	v, err := deadlock.ParseVictim("fewest-locks")
	fmt.Println(v, err)
	// Output:
	// fewest-locks <nil>
}
