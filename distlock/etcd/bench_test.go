package etcd_test

import (
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/concurkit/concurkit/distlock/etcd"
	"github.com/concurkit/concurkit/internal/testenv"
)

// BenchmarkAcquireRelease measures one uncontended acquire+release round
// (grant, put+read txn, revoke: 3 round trips) and
// reports the median and p99 latency.
func BenchmarkAcquireRelease(b *testing.B) {
	c, prefix := testenv.Etcd(b)
	l, err := etcd.New(c, &etcd.Config{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	warm, err := l.Acquire(ctx, "bench", nil) // connection warm-up
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
