package deadlock_test

import (
	"runtime"
	"testing"

	"github.com/concurkit/concurkit/deadlock"
)

// thrashing is the workload of the "memory grows with every lock request"
// report, scaled down: 80% of the accesses go to 10 hot resources, so
// under lock timeouts most attempts abort and, with restart delays that do
// not grow (noBackoff), each transaction makes tens to hundreds of lock
// requests before it commits.
func thrashing(t *testing.T, n int, hot int) []deadlock.Txn {
	t.Helper()
	txns, err := deadlock.Workload{Seed: 1, Transactions: n, Resources: 100000, Length: 8, ReadRatio: 0.5, HotResources: hot}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return txns
}

// noBackoff, as Options.MaxRestartDelay, keeps every restart window at
// [0, 2·RestartDelay] (mean RestartDelay, as the fixed penalty the
// simulator used to have) under NoWait and Timeout: the growing backoff
// would otherwise end the thrashing these tests need.
const noBackoff = 2 * 100 * deadlock.Microsecond

// TestSimulateMemoryIndependentOfRequests runs the same number of
// transactions once without contention (one lock request per step) and
// once thrashing (dozens of requests per step), and compares the bytes the
// runs allocate. What a run needs grows with its transactions, never with
// its lock requests, so the thrashing run may not cost much more than the
// calm one; a simulator that keeps a record per wait or per aborted
// attempt allocates in proportion to the requests (tens of times more
// here). Allocation counts do not depend on timing or on the GC, so the
// generous factor 2 cannot flake.
func TestSimulateMemoryIndependentOfRequests(t *testing.T) {
	opts := &deadlock.Options{Policy: deadlock.Timeout, Concurrency: 32, Seed: 1, MaxGraphs: -1, MaxRestartDelay: noBackoff}
	run := func(txns []deadlock.Txn) (allocated uint64, requests int) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := deadlock.Simulate(t.Context(), txns, opts)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		return after.TotalAlloc - before.TotalAlloc, res.LockRequests
	}
	calmBytes, calmReqs := run(thrashing(t, 200, 0))
	hotBytes, hotReqs := run(thrashing(t, 200, 10))
	t.Logf("calm: %d requests, %d bytes; thrashing: %d requests, %d bytes", calmReqs, calmBytes, hotReqs, hotBytes)
	if hotReqs < 20*calmReqs {
		t.Fatalf("the workload does not thrash: %d lock requests against %d", hotReqs, calmReqs)
	}
	if hotBytes > 2*calmBytes {
		t.Errorf("%d lock requests allocated %d bytes, %.1fx the %d bytes of %d requests by as many transactions: memory grows with lock requests",
			hotReqs, hotBytes, float64(hotBytes)/float64(calmBytes), calmBytes, calmReqs)
	}
}

// TestSimulateHoldsOnlyLiveState looks at the simulator after every event
// of thrashing runs of N and 4N transactions under every policy: without
// Options.History it holds no per-request record at all; with it, the
// grants of attempts in progress never outnumber the steps of the live
// transactions, and only the committed steps stay. The event queue stays
// bounded by the live transactions, whatever N.
func TestSimulateHoldsOnlyLiveState(t *testing.T) {
	const concurrency, length = 16, 8
	for _, n := range []int{100, 400} {
		txns := thrashing(t, n, 10)
		for _, p := range deadlock.AllPolicies() {
			for _, history := range []bool{false, true} {
				opts := &deadlock.Options{Policy: p, Concurrency: concurrency, Seed: 1, History: history, MaxRestartDelay: noBackoff}
				res, f, err := deadlock.SimulateFootprint(t.Context(), txns, opts)
				if err != nil {
					t.Fatalf("n=%d %s: %v", n, p, err)
				}
				if f.Live > concurrency || f.Events > 4*f.Live+2 {
					t.Errorf("n=%d %s history=%v: %d live transactions, %d queued events (%d requests)", n, p, history, f.Live, f.Events, res.LockRequests)
				}
				// Under lock timeouts no wait outlasts the timeout: the
				// histogram has a bucket per µs up to it, however many waits.
				if p == deadlock.Timeout && f.Buckets > int(deadlock.Millisecond)+1 {
					t.Errorf("n=%d timeout: %d histogram buckets for waits of at most 1ms", n, f.Buckets)
				}
				if !history {
					if f.Records != 0 || res.History != nil {
						t.Errorf("n=%d %s: held %d records (%d requests), history %d ops, without Options.History", n, p, f.Records, res.LockRequests, len(res.History))
					}
					continue
				}
				if f.PendingOverLive != 0 || f.Pending > concurrency*length || f.Spare > concurrency {
					t.Errorf("n=%d %s: %d pending grants at most (more than the live transactions' steps after %d events), %d spare buffers",
						n, p, f.Pending, f.PendingOverLive, f.Spare)
				}
				if f.Committed != n*length || len(res.History) != n*length {
					t.Errorf("n=%d %s: kept %d committed grants, history %d, want %d", n, p, f.Committed, len(res.History), n*length)
				}
			}
		}
	}
}
