package bench_test

// The harness of BenchmarkPeers: interleaved runs of two or more
// implementations of one operation, reported per implementation in a form
// benchstat can compare (see peers_test.go).

import (
	"context"
	"flag"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/concurkit/concurkit/fenced"
)

// peersTime is how long one repetition of a pair runs (all implementations
// together, interleaved). The number of repetitions is -test.count.
var peersTime = flag.Duration("peers.time", time.Second, "BenchmarkPeers: duration of one interleaved repetition of a pair")

// impl is one implementation of a pair's operation (acquire + release of a
// lock, one guarded write, one transaction). name becomes the sub-benchmark
// "impl=<name>"; the first impl of a pair is the one the others are
// compared with (the peer, or the hand-written code).
type impl struct {
	name string
	op   func(ctx context.Context) error
}

// stats is one implementation's result in one repetition.
type stats struct {
	nsPerOp, p50, p99 float64 // ns
}

// runPeers measures impls interleaved: each round runs every
// implementation once, in an order rotated from round to round, so that
// the machine's noise (other tenants, GC, the servers' own housekeeping)
// hits all of them alike. A repetition lasts -peers.time (and at least 20
// rounds); there are -test.count repetitions, made up front. Then each
// implementation gets a sub-benchmark "impl=<name>" that reports, once per
// repetition (benchstat sees -test.count results, as for any benchmark):
//
//	ns/op      the implementation's mean time per operation (it overrides
//	           the framework's figure, which would time nothing)
//	p50-µs     its median (HdrHistogram, 3 significant digits)
//	p99-µs     its 99th percentile
//	p50-ratio  its p50 over the first implementation's p50 in the same
//	p99-ratio  repetition (paired, so noise between repetitions cancels);
//	           not reported by the first implementation itself
//
// Run with -benchtime=1x: the sub-benchmarks only report; with a duration
// benchtime the framework calls them a few more times for nothing (and
// prints a meaningless iteration count).
func runPeers(b *testing.B, impls ...impl) {
	b.Helper()
	ctx := b.Context()
	reps := 1
	if f := flag.Lookup("test.count"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			reps = n
		}
	}
	// Warm up: connections, prepared statements, parent nodes, scripts.
	for range 5 {
		for _, im := range impls {
			if err := im.op(ctx); err != nil {
				b.Fatalf("%s: warm-up: %v", im.name, err)
			}
		}
	}
	results := make([][]stats, reps)
	hs := make([]*hdr.Histogram, len(impls))
	for i := range hs {
		hs[i] = hdr.New(1, int64(10*time.Second), 3)
	}
	for r := range reps {
		total := make([]time.Duration, len(impls))
		for _, h := range hs {
			h.Reset()
		}
		start := time.Now()
		for round := 0; round < 20 || time.Since(start) < *peersTime; round++ {
			for k := range impls {
				i := (round + k) % len(impls)
				t0 := time.Now()
				if err := impls[i].op(ctx); err != nil {
					b.Fatalf("%s: %v", impls[i].name, err)
				}
				d := time.Since(t0)
				total[i] += d
				_ = hs[i].RecordValue(max(int64(d), 1))
			}
		}
		results[r] = make([]stats, len(impls))
		for i, h := range hs {
			n := int(h.TotalCount())
			results[r][i] = stats{
				nsPerOp: float64(total[i]) / float64(n),
				p50:     float64(h.ValueAtQuantile(50)),
				p99:     float64(h.ValueAtQuantile(99)),
			}
		}
	}
	for i, im := range impls {
		var (
			mu   sync.Mutex
			seen = map[*testing.B]int{}
		)
		b.Run("impl="+im.name, func(b *testing.B) {
			// One repetition per B: the framework makes a new B for each
			// -count repetition and may call it several times.
			mu.Lock()
			r, ok := seen[b]
			if !ok {
				r = len(seen) % reps
				seen[b] = r
			}
			mu.Unlock()
			s, base := results[r][i], results[r][0]
			b.ReportMetric(s.nsPerOp, "ns/op")
			b.ReportMetric(s.p50/1e3, "p50-µs")
			b.ReportMetric(s.p99/1e3, "p99-µs")
			if i > 0 {
				b.ReportMetric(s.p50/base.p50, "p50-ratio")
				b.ReportMetric(s.p99/base.p99, "p99-ratio")
			}
		})
	}
}

// atomicTokens is the cheapest fenced.Source there is: an in-process
// counter. It exists ONLY in this benchmark, to isolate the cost of a
// lock from the cost of its token source. It is UNSAFE for real use: its
// tokens are increasing only within one process (and one counter), so two
// processes — or a restarted one — would hand out tokens that go back in
// time and let a stale holder's write through. Real lockers take their
// tokens from storage that survives them (fencedpg.Sequence, the default
// here).
type atomicTokens struct{ n atomic.Int64 }

func (s *atomicTokens) Next(context.Context) (fenced.Token, error) {
	n := s.n.Add(1)
	if n <= 0 || n == math.MaxInt64 {
		return 0, fenced.ErrTokenOverflow
	}
	return fenced.Token(n), nil
}
