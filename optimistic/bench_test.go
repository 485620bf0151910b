package optimistic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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
			policy := retry.Policy{
				MaxAttempts: 10_000, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond,
			}
			ctx := countRetries(b.Context(), &retries)
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

// BenchmarkUpdateMySQLVsHandWritten compares UpdateMySQL with the
// hand-written CAS it replaces (UPDATE … SET …, version = version + 1
// WHERE id = ? AND version = ?, RowsAffected checked) on a *sql.DB (where
// UpdateMySQL also arms the KILL QUERY cancellation) and on a *sql.Conn.
// Each iteration runs one of each, alternating which goes first, so that
// both see the same load on a shared machine; it reports their mean
// latencies and the ratio UpdateMySQL / hand-written.
func BenchmarkUpdateMySQLVsHandWritten(b *testing.B) {
	db := myDB(b)
	ctx := b.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO counters (id) VALUES (1)"); err != nil {
		b.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	tbl := optimistic.Table{Name: "counters", Key: "id", Version: "version"}
	const handWritten = "UPDATE `counters` SET `value` = ?, `version` = `version` + 1 WHERE `id` = ? AND `version` = ?"
	version := int64(1)
	for _, h := range []struct {
		name string
		db   optimistic.SQLDB
	}{{"DB", db}, {"Conn", conn}} {
		b.Run(h.name, func(b *testing.B) {
			hand := func(i int) {
				res, err := h.db.ExecContext(ctx, handWritten, i, 1, version)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := res.RowsAffected(); err != nil || n != 1 {
					b.Fatalf("%d rows, %v", n, err)
				}
				version++
			}
			ours := func(i int) {
				var err error
				if version, err = optimistic.UpdateMySQL(ctx, h.db, tbl, 1, version, map[string]any{"value": i}); err != nil {
					b.Fatal(err)
				}
			}
			var tHand, tOurs time.Duration
			for i := 0; b.Loop(); i++ {
				first, second, t1, t2 := hand, ours, &tHand, &tOurs
				if i%2 == 1 {
					first, second, t1, t2 = ours, hand, &tOurs, &tHand
				}
				start := time.Now()
				first(i)
				mid := time.Now()
				second(i)
				*t1 += mid.Sub(start)
				*t2 += time.Since(mid)
			}
			b.ReportMetric(float64(tHand.Nanoseconds())/float64(b.N), "hand-ns/cas")
			b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "UpdateMySQL-ns/cas")
			b.ReportMetric(float64(tOurs)/float64(tHand), "ratio")
		})
	}
}
