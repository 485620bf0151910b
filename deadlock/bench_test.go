package deadlock_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/concurkit/concurkit/deadlock"
)

// lockDriver runs a closed system of `active` transactions against a bare
// LockManager: each picks random resources (S or X), waits when blocked,
// aborts the youngest of any cycle found on the new wait (the detect
// policy), and commits after `length` locks, immediately replaced by a new
// transaction. Every loop turn is one lock request.
type lockDriver struct {
	m         deadlock.LockManager
	rng       *rand.Rand
	resources int
	length    int
	ids       []deadlock.TxnID // slot -> current transaction
	held      []int            // slot -> locks taken
	waiting   []bool
	slot      map[deadlock.TxnID]int
	ready     []int // slots that can issue
	next      deadlock.TxnID
	requests  int
	deadlocks int
}

func newLockDriver(active, resources, length int, seed uint64) *lockDriver {
	d := &lockDriver{
		rng: rand.New(rand.NewPCG(seed, 1)), resources: resources, length: length,
		ids: make([]deadlock.TxnID, active), held: make([]int, active), waiting: make([]bool, active),
		slot: make(map[deadlock.TxnID]int, active),
	}
	for i := range active {
		d.fresh(i)
		d.ready = append(d.ready, i)
	}
	return d
}

func (d *lockDriver) fresh(i int) {
	d.next++
	d.ids[i] = d.next
	d.held[i] = 0
	d.slot[d.next] = i
}

func (d *lockDriver) end(i int) {
	id := d.ids[i]
	delete(d.slot, id)
	for _, g := range d.m.Release(id) {
		j := d.slot[g.Txn]
		d.waiting[j] = false
		d.held[j]++
		d.ready = append(d.ready, j)
	}
	d.fresh(i)
}

// step issues one lock request from a ready transaction.
func (d *lockDriver) step() {
	k := d.rng.IntN(len(d.ready))
	i := d.ready[k]
	if d.held[i] >= d.length {
		d.end(i) // commit: the slot stays ready with a new transaction
		return
	}
	mode := deadlock.Exclusive
	if d.rng.IntN(2) == 0 {
		mode = deadlock.Shared
	}
	d.requests++
	st, _ := d.m.Acquire(d.ids[i], deadlock.Resource(d.rng.IntN(d.resources)), mode)
	if st == deadlock.Granted {
		d.held[i]++
		return
	}
	d.waiting[i] = true
	d.ready[k] = d.ready[len(d.ready)-1]
	d.ready = d.ready[:len(d.ready)-1]
	for d.waiting[i] {
		c := d.m.FindCycle(d.ids[i])
		if c == nil {
			return
		}
		d.deadlocks++
		v := c[0]
		for _, t := range c {
			v = max(v, t)
		}
		j := d.slot[v]
		d.waiting[j] = false
		d.end(j)
		if j != i {
			d.ready = append(d.ready, j)
		}
	}
	if !d.waiting[i] {
		d.ready = append(d.ready, i)
	}
}

// BenchmarkLockManager measures raw lock requests per second (one
// goroutine, so one core) with incremental cycle detection on every wait:
// 10,000 resources with 100 to 10,000 concurrent transactions (contention
// grows with them), then 100 to 100,000 concurrent transactions at constant
// contention (10 resources per transaction).
func BenchmarkLockManager(b *testing.B) {
	for _, c := range []struct{ active, resources int }{
		{100, 10000}, {1000, 10000}, {10000, 10000},
		{100, 1000}, {10000, 100000}, {100000, 1000000},
	} {
		b.Run(fmt.Sprintf("txns=%d/resources=%d", c.active, c.resources), func(b *testing.B) {
			d := newLockDriver(c.active, c.resources, 10, 1)
			// Warm up to the steady state before timing.
			for range 2 * c.active * 10 {
				d.step()
			}
			d.requests, d.deadlocks = 0, 0
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				d.step()
			}
			reportCPU(b, d.requests, cpuTime()-cpu)
			b.ReportMetric(float64(d.requests)/b.Elapsed().Seconds(), "requests/s")
			b.ReportMetric(float64(d.deadlocks)/float64(max(d.requests, 1)), "deadlocks/request")
		})
	}
}

// BenchmarkSimulate measures the whole discrete-event simulator (events,
// policies, history) in lock requests per second of wall time.
func BenchmarkSimulate(b *testing.B) {
	for _, c := range []struct{ active, resources int }{
		{100, 1000}, {1000, 10000}, {10000, 100000}, {100000, 1000000},
	} {
		for _, p := range []deadlock.Policy{deadlock.Detect, deadlock.WaitDie, deadlock.NoWait} {
			if c.active != 1000 && p != deadlock.Detect {
				continue
			}
			b.Run(fmt.Sprintf("txns=%d/resources=%d/%s", c.active, c.resources, p), func(b *testing.B) {
				txns, err := deadlock.Workload{Seed: 1, Transactions: max(4*c.active, 20000), Resources: c.resources, Length: 10, ReadRatio: 0.5}.Generate()
				if err != nil {
					b.Fatal(err)
				}
				requests := 0
				cpu := cpuTime()
				for b.Loop() {
					res, err := deadlock.Simulate(b.Context(), txns, &deadlock.Options{Policy: p, Concurrency: c.active, MaxGraphs: -1})
					if err != nil {
						b.Fatal(err)
					}
					requests += res.LockRequests
				}
				reportCPU(b, requests, cpuTime()-cpu)
				b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "requests/s")
			})
		}
	}
}

// BenchmarkSimulateThrash is the thrashing run of the "memory grows with
// every lock request" issue, scaled down: lock timeouts on 10 hot resources
// (80% of accesses), 32 transactions active, as `concurkit simulate
// --policy timeout --hot 10` ran it before restart delays grew with a
// transaction's aborts (noBackoff keeps them from growing). Each run makes
// about a thousand lock requests per transaction; B/op (-benchmem) shows
// what that costs in memory.
func BenchmarkSimulateThrash(b *testing.B) {
	txns, err := deadlock.Workload{Seed: 1, Transactions: 1000, Resources: 1000, Length: 8, ReadRatio: 0.5, HotResources: 10}.Generate()
	if err != nil {
		b.Fatal(err)
	}
	requests := 0
	cpu := cpuTime()
	for b.Loop() {
		res, err := deadlock.Simulate(b.Context(), txns, &deadlock.Options{Policy: deadlock.Timeout, Concurrency: 32, Seed: 1, MaxRestartDelay: noBackoff})
		if err != nil {
			b.Fatal(err)
		}
		requests += res.LockRequests
	}
	reportCPU(b, requests, cpuTime()-cpu)
	b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "requests/s")
}

// reportCPU reports requests per second of process CPU time (user+system,
// GC included), the figure that stays meaningful on a loaded machine.
func reportCPU(b *testing.B, requests int, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(requests)/cpu.Seconds(), "requests/cpu-s")
	}
}
