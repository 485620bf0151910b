package zklock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/testkit"
)

// BenchmarkAcquireRelease measures one uncontended acquire+release round
// (create, children + a pipelined get of our node, delete: 3 round trips)
// on one session and
// reports the median and p99 latency.
func BenchmarkAcquireRelease(b *testing.B) {
	servers, root := testkit.ZooKeeper(b)
	l, err := zklock.New(servers, &zklock.Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(context.Background())
	ctx := b.Context()
	warm, err := l.Acquire(ctx, "bench", nil) // session and parent node
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		b.Fatal(err)
	}
	h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		ls, err := l.Acquire(ctx, "bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			b.Fatal(err)
		}
		_ = h.RecordValue(time.Since(start).Microseconds())
	}
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
}

// BenchmarkContended: 4 Lockers (4 sessions) take turns on one key; b.N
// critical sections in all. Reports the handover rate and the latency of
// Acquire (waiting included).
func BenchmarkContended(b *testing.B) {
	servers, root := testkit.ZooKeeper(b)
	const workers = 4
	lockers := make([]*zklock.Locker, workers)
	for i := range lockers {
		l, err := zklock.New(servers, &zklock.Config{Root: root})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close(context.Background())
		lockers[i] = l
	}
	benchContended(b, func(i int) distlock.Locker { return lockers[i] }, workers)
}

func benchContended(b *testing.B, locker func(i int) distlock.Locker, workers int) {
	ctx := b.Context()
	var (
		mu   sync.Mutex
		h    = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		next atomic.Int64
		lost atomic.Int64
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for i := range workers {
		l := locker(i)
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				ls, err := l.Acquire(ctx, "contended", nil)
				for errors.Is(err, distlock.ErrLeaseLost) {
					// The contender's own lease ran out while it waited (a
					// stalled machine): what a caller does is try again.
					lost.Add(1)
					ls, err = l.Acquire(ctx, "contended", nil)
				}
				if err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				if err := ls.Release(ctx); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				_ = h.RecordValue(d.Microseconds())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sections/s")
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "acquire-p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "acquire-p99-µs")
	if n := lost.Load(); n > 0 {
		b.Logf("%d waits ended with the contender's lease lost (retried)", n)
	}
}
