package pglock_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
)

// BenchmarkAcquireRelease: one client, uncontended key, TryAcquire +
// Release per op; reports the median and p99 latency of the pair.
func BenchmarkAcquireRelease(b *testing.B) {
	l, err := pglock.New(pool(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	key := fmt.Sprintf("bench-%d", rand.Uint32())
	opts := &distlock.Options{TTL: 10 * time.Second}
	lat := make([]time.Duration, 0, b.N)
	ctx := b.Context()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		lz, err := l.TryAcquire(ctx, key, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := lz.Release(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
