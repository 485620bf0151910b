package deadlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/concurkit/concurkit/deadlock"
)

// livelock is the smallest workload found on which lock timeouts with a
// fixed restart penalty never commit anything: 3 transactions of 7 writes
// over 8 rows. After each timeout the two survivors take the victim's locks
// and deadlock with each other within a step; the victim restarts 50-150µs
// later, queues behind them, and the next timeout, 1ms later, picks the
// survivor that waited first: T2, T1, T3, T2... every 1.01ms, for every
// seed of the jitter.
func livelock(t testing.TB) []deadlock.Txn {
	t.Helper()
	txns, err := deadlock.Workload{Seed: 735, Transactions: 3, Resources: 8, Length: 7}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return txns
}

type policyVictim struct {
	p deadlock.Policy
	v deadlock.Victim
}

func everyPolicy() []policyVictim {
	var out []policyVictim
	for _, p := range deadlock.AllPolicies() {
		out = append(out, policyVictim{p, deadlock.Youngest})
		if p == deadlock.Detect || p == deadlock.DetectPeriodic {
			out = append(out, policyVictim{p, deadlock.LeastWork}, policyVictim{p, deadlock.FewestLocks})
		}
	}
	return out
}

// TestSimulateLockTimeoutCycleEnds runs the livelocking workload under every
// policy and victim rule with 50 seeds each: every transaction commits
// within a bounded number of events. With a restart delay that does not
// grow, lock timeouts never commit anything here and the run stops at
// MaxEvents.
func TestSimulateLockTimeoutCycleEnds(t *testing.T) {
	const maxEvents = 5000 // the worst seed needs about 200
	txns := livelock(t)
	for _, c := range everyPolicy() {
		most := 0
		for seed := range uint64(50) {
			res, err := deadlock.Simulate(t.Context(), txns, &deadlock.Options{
				Policy: c.p, Victim: c.v, Seed: seed, MaxEvents: maxEvents, Check: true, History: true,
			})
			if err != nil {
				t.Fatalf("%s/%s seed %d: %v (%d lock requests, %d aborts)", c.p, c.v, seed, err, res.LockRequests, res.Aborts.Total())
			}
			if res.Committed != len(txns) {
				t.Fatalf("%s/%s seed %d: committed %d", c.p, c.v, seed, res.Committed)
			}
			if err := res.CheckSerializable(); err != nil {
				t.Fatalf("%s/%s seed %d: %v", c.p, c.v, seed, err)
			}
			most = max(most, res.Events)
		}
		t.Logf("%s/%s: at most %d events", c.p, c.v, most)
	}
}

// TestSimulateRestartBackoff reads the restart delays back from traces:
// after its n-th abort a transaction's next step (here always a lock
// request, traced as a grant, a wait or, under no-wait, an abort) comes
// after a delay in [0, min(MaxRestartDelay, 2d·2ⁿ⁻¹)] under NoWait and
// Timeout, and in [d/2, 3d/2] under the other policies. The delays must
// also really grow: some reach past 3d/2, and some come close to the cap.
func TestSimulateRestartBackoff(t *testing.T) {
	const d = 100 * deadlock.Microsecond
	txns, err := deadlock.Workload{Seed: 1, Transactions: 200, Resources: 1000, ReadRatio: 0.5, HotResources: 5}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range deadlock.AllPolicies() {
		for _, limit := range []deadlock.Time{0, 1500 * deadlock.Microsecond} {
			opts := &deadlock.Options{Policy: p, Concurrency: 16, Seed: 2, RestartDelay: d, MaxRestartDelay: limit, Trace: true}
			res, err := deadlock.Simulate(t.Context(), txns, opts)
			if err != nil {
				t.Fatal(err)
			}
			growing := p == deadlock.NoWait || p == deadlock.Timeout
			if limit == 0 && growing {
				// The default: 4 times the longest attempt, at least 2d.
				wait := deadlock.Time(0)
				if p == deadlock.Timeout {
					wait = deadlock.Millisecond
				}
				limit = max(2*d, 4*8*(10*deadlock.Microsecond+wait))
			}
			aborts := map[deadlock.TxnID]int{}
			abortedAt := map[deadlock.TxnID]deadlock.Time{}
			var longest deadlock.Time
			n := 0
			for _, e := range res.Trace {
				if at, ok := abortedAt[e.Txn]; ok {
					delete(abortedAt, e.Txn)
					delay, k := e.Time-at, aborts[e.Txn]
					lo, hi := d/2, 3*d/2
					if growing {
						lo, hi = 0, min(limit, 2*d<<min(k-1, 40))
					}
					if delay < lo || delay > hi {
						t.Fatalf("%s: T%d restarted %s after its abort #%d, want [%s, %s]", p, e.Txn, delay, k, lo, hi)
					}
					longest = max(longest, delay)
					n++
				}
				if e.Kind == deadlock.TraceAbort {
					aborts[e.Txn]++
					abortedAt[e.Txn] = e.Time
				}
			}
			if n < 100 {
				t.Fatalf("%s: only %d restarts", p, n)
			}
			if growing && (longest <= 3*d/2 || longest < limit*3/4) {
				t.Errorf("%s cap %s: the longest of %d restart delays is %s", p, limit, n, longest)
			}
			t.Logf("%s cap %s: %d restarts, longest delay %s", p, limit, n, longest)
		}
	}
}

// TestSimulateLimits: MaxEvents and MaxTime stop a thrashing run with
// ErrLimit and the Result so far; so does ctx, with its own error.
func TestSimulateLimits(t *testing.T) {
	txns := thrashing(t, 200, 10)
	opts := &deadlock.Options{Policy: deadlock.Timeout, Concurrency: 32, Seed: 1, MaxRestartDelay: noBackoff, History: true}

	o := *opts
	o.MaxEvents = 1000
	res, err := deadlock.Simulate(t.Context(), txns, &o)
	if !errors.Is(err, deadlock.ErrLimit) || res == nil {
		t.Fatalf("MaxEvents: %v, %v", res, err)
	}
	if res.Events != o.MaxEvents || res.Committed >= len(txns) || res.LockRequests == 0 || res.Aborts.Total() == 0 {
		t.Fatalf("MaxEvents: %d events, %d committed, %d requests, %d aborts", res.Events, res.Committed, res.LockRequests, res.Aborts.Total())
	}
	if err := res.CheckSerializable(); err != nil {
		t.Fatal(err)
	}
	t.Log(err)

	o = *opts
	o.MaxTime = 5 * deadlock.Millisecond
	res, err = deadlock.Simulate(t.Context(), txns, &o)
	if !errors.Is(err, deadlock.ErrLimit) || res == nil || res.Committed >= len(txns) || res.Elapsed > o.MaxTime {
		t.Fatalf("MaxTime: %+v, %v", res, err)
	}
	t.Log(err)

	// Generous limits change nothing.
	full, err := deadlock.Simulate(t.Context(), txns, opts)
	if err != nil {
		t.Fatal(err)
	}
	o = *opts
	o.MaxEvents, o.MaxTime = full.Events, full.Elapsed
	again, err := deadlock.Simulate(t.Context(), txns, &o)
	if err != nil || again.Events != full.Events || again.Committed != full.Committed {
		t.Fatalf("limits at the run's own size: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err = deadlock.Simulate(ctx, txns, opts)
	if !errors.Is(err, context.Canceled) || errors.Is(err, deadlock.ErrLimit) || res == nil || res.Committed != 0 {
		t.Fatalf("cancelled: %v, %v", res, err)
	}
}

// TestSimulateHugeTimes: absurd delays saturate the logical clock instead of
// wrapping around (or panicking in the jitter), and the run still ends.
func TestSimulateHugeTimes(t *testing.T) {
	const huge = deadlock.Time(math.MaxInt64)
	for _, o := range []deadlock.Options{
		{RestartDelay: huge},
		{Policy: deadlock.Timeout, RestartDelay: huge},
		{Policy: deadlock.Timeout, LockTimeout: huge},
		{Policy: deadlock.NoWait, MaxRestartDelay: huge},
		{Policy: deadlock.DetectPeriodic, DetectInterval: huge, OpTime: huge},
	} {
		name := fmt.Sprintf("%+v", o)
		o.MaxEvents = 100000
		res, err := deadlock.Simulate(t.Context(), crossed(), &o)
		if err != nil || res.Committed != 2 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzSimulate runs small random workloads under every policy with a bound
// on events: every transaction must commit, within the bound, in a
// conflict-serializable history, with the lock table checked after every
// event. The first seed entry is the livelock above.
func FuzzSimulate(f *testing.F) {
	f.Add(uint64(735), uint8(2), uint8(6), uint8(7), uint8(0), uint8(5), uint8(0), uint64(1)) // 3 txns x 7 writes, 8 rows, timeout
	f.Add(uint64(1), uint8(6), uint8(8), uint8(4), uint8(128), uint8(4), uint8(0), uint64(7))
	f.Add(uint64(2), uint8(5), uint8(3), uint8(2), uint8(200), uint8(0), uint8(1), uint64(3))
	f.Fuzz(func(t *testing.T, wlSeed uint64, n, length, resources, reads, policy, victim uint8, seed uint64) {
		wl := deadlock.Workload{
			Seed:         wlSeed,
			Transactions: 1 + int(n%8),
			Length:       1 + int(length%8),
			Resources:    1 + int(resources%10),
			ReadRatio:    float64(reads) / 255,
		}
		txns, err := wl.Generate()
		if err != nil {
			t.Fatal(err)
		}
		p := deadlock.AllPolicies()[int(policy)%len(deadlock.AllPolicies())]
		v := deadlock.Victim(victim % 3)
		// A few hundred events per transaction at most are seen; the
		// bound turns a run that never ends into a failure.
		res, err := deadlock.Simulate(t.Context(), txns, &deadlock.Options{
			Policy: p, Victim: v, Seed: seed, Concurrency: 1 + int(n%8),
			MaxEvents: 100000, Check: true, History: true,
		})
		if err != nil {
			t.Fatalf("%+v %s/%s seed %d: %v", wl, p, v, seed, err)
		}
		if res.Committed != len(txns) {
			t.Fatalf("committed %d of %d", res.Committed, len(txns))
		}
		if err := res.CheckSerializable(); err != nil {
			t.Fatal(err)
		}
	})
}
