package dynamolock_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/dynamolock"
	"github.com/concurkit/concurkit/testkit"
)

// BenchmarkAcquireRelease: one client, uncontended key, TryAcquire +
// Release per op; reports the median and p99 latency of the pair.
func BenchmarkAcquireRelease(b *testing.B) {
	c, prefix := testkit.DynamoDB(b)
	if err := dynamolock.CreateTable(b.Context(), c, prefix+"locks", ""); err != nil {
		b.Fatal(err)
	}
	l, err := dynamolock.New(c, &dynamolock.Config{Table: prefix + "locks"})
	if err != nil {
		b.Fatal(err)
	}
	key := fmt.Sprintf("bench-%d", rand.Uint32())
	opts := &distlock.Options{TTL: 10 * time.Second}
	lat := make([]time.Duration, 0, b.N)
	ctx := b.Context()
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
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}
