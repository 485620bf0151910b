package hotrowpg_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowpg"
)

// BenchmarkHotRow: one row, 64 goroutines (b.SetParallelism over
// GOMAXPROCS), each operation an increment of 1 — by escrow (one
// statement and one commit each) and through a Combiner (one per batch).
// Compare the two side by side in one run: go test -bench HotRow. (The
// project's test server runs with fsync and synchronous_commit off: on a
// durable server each escrow commit also waits for a log flush, which a
// batch pays once.)
func BenchmarkHotRow(b *testing.B) {
	for _, mode := range []string{"escrow", "combined"} {
		b.Run(mode, func(b *testing.B) {
			p := pool(b, map[int64]int64{1: 0})
			st, err := hotrowpg.NewStore[int64](p, stock)
			if err != nil {
				b.Fatal(err)
			}
			c, err := hotrow.NewCombiner[int64](st, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			add := func(ctx context.Context) error {
				_, err := hotrowpg.Add(ctx, p, stock, 1, 1, nil)
				return err
			}
			if mode == "combined" {
				add = func(ctx context.Context) error { _, err := c.Add(ctx, 1, 1); return err }
			}
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := add(context.Background()); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			var v int64
			if err := p.QueryRow(context.Background(), `SELECT v FROM stock WHERE id = 1`).Scan(&v); err != nil || v != int64(b.N) {
				b.Fatalf("row %d after %d increments (%v)", v, b.N, err)
			}
		})
	}
}
