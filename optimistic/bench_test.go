package optimistic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/retry"
)

// BenchmarkUpdate measures one uncontended CAS (one round trip): a single
// writer that knows the current version.
func BenchmarkUpdate(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b, "counters", "value")
			s.insert(b, 1, 0)
			ctx := b.Context()
			version := int64(1)
			var err error
			for i := 0; b.Loop(); i++ {
				if version, err = s.update(ctx, int64(1), version, map[string]any{"value": i}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContended measures a read-modify-write of one hot row through Do
// by 8 concurrent writers (each its own connection); retries/op counts
// conflicts per successful increment.
func BenchmarkContended(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b, "counters", "value")
			s.insert(b, 1, 0)
			var retries atomic.Int64
			policy := retry.Policy{MaxAttempts: 10_000, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}
			ctx := observe.WithHooks(b.Context(), &observe.Hooks{
				Conflict: func(context.Context, observe.ConflictEvent) { retries.Add(1) },
			})
			workers := make(chan *store, 8)
			for range 8 {
				workers <- s.worker(b)
			}
			b.SetParallelism(4) // 4 × GOMAXPROCS(2) = 8 writers here
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := <-workers
				for pb.Next() {
					err := optimistic.Do(ctx, policy, func(ctx context.Context) error {
						v, version, err := w.read(ctx, 1)
						if err != nil {
							return err
						}
						_, err = w.update(ctx, int64(1), version, map[string]any{"value": v + 1})
						return err
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(retries.Load())/float64(b.N), "retries/op")
		})
	}
}
