package pessimistic_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// benchParallelism × GOMAXPROCS goroutines increment one hot row.
const benchParallelism = 4

// BenchmarkHotRow compares blocking FOR UPDATE with NOWAIT + retry on one
// hot counter row. Reported: ns/op (one committed increment), retries/op.
func BenchmarkHotRow(b *testing.B) {
	for _, s := range strategies(false)[:2] {
		b.Run("Postgres/"+s.name, func(b *testing.B) {
			pool := pgPool(b, 16)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, "INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
				b.Fatal(err)
			}
			var retries atomic.Int64
			opts := s.opts
			ctx = countRetries(ctx, &retries)
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := pessimisticpg.InTx(ctx, pool, &opts, func(ctx context.Context, tx pgx.Tx) error {
						v, err := s.pgRead(ctx, tx, "SELECT value FROM counters WHERE id = $1", 1)
						if err != nil {
							return err
						}
						_, err = tx.Exec(ctx, "UPDATE counters SET value = $1 WHERE id = $2", v+1, 1)
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
	for _, s := range strategies(true)[:2] {
		b.Run("MariaDB/"+s.name, func(b *testing.B) {
			db := myDB(b, 16)
			ctx := context.Background()
			if _, err := db.ExecContext(ctx, "INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
				b.Fatal(err)
			}
			var retries atomic.Int64
			opts := s.opts
			ctx = countRetries(ctx, &retries)
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := pessimisticmysql.InTx(ctx, db, &opts, func(ctx context.Context, tx *sql.Tx) error {
						v, err := s.myRead(ctx, tx, "SELECT value FROM counters WHERE id = ?", 1)
						if err != nil {
							return err
						}
						_, err = tx.ExecContext(ctx, "UPDATE counters SET value = ? WHERE id = ?", v+1, 1)
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

// countRetries returns ctx with observe hooks that count the retries (not
// the final give-up) into n.
func countRetries(ctx context.Context, n *atomic.Int64) context.Context {
	return observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			n.Add(1)
		}
	}})
}
