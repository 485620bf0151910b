package hotrowpg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// BenchmarkLedger: transfers of 1 between random pairs of 2 or 16 hot
// accounts, 64 goroutines — one interactive transaction per transfer
// (lock both accounts in key order, check, write both, commit) beside a
// Ledger (one transaction per batch). Money is conserved in both.
func BenchmarkLedger(b *testing.B) {
	for _, accounts := range []int64{2, 16} {
		for _, mode := range []string{"interactive", "batched"} {
			b.Run(fmt.Sprintf("accounts=%d/%s", accounts, mode), func(b *testing.B) {
				rows := map[int64]int64{}
				for a := range accounts {
					rows[a] = 1 << 40
				}
				p := pool(b, rows)
				st, err := hotrowpg.NewLedgerStore[int64](p, stock)
				if err != nil {
					b.Fatal(err)
				}
				l, err := hotrow.NewLedger[int64](st, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close(context.Background())
				transfer := func(ctx context.Context, tr hotrow.Transfer[int64]) error {
					_, err := l.Transfer(ctx, tr)
					return err
				}
				if mode == "interactive" {
					transfer = func(ctx context.Context, tr hotrow.Transfer[int64]) error {
						return interactiveTransfer(ctx, p, tr)
					}
				}
				var seed atomic.Uint64
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(seed.Add(1), 2))
					for pb.Next() {
						from := rng.Int64N(accounts)
						to := (from + 1 + rng.Int64N(accounts-1)) % accounts
						if err := transfer(context.Background(), hotrow.Transfer[int64]{From: from, To: to, Amount: 1}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				var sum int64
				if err := p.QueryRow(context.Background(), `SELECT sum(v) FROM stock`).Scan(&sum); err != nil || sum != accounts<<40 {
					b.Fatalf("sum %d after %d transfers (%v)", sum, b.N, err)
				}
			})
		}
	}
}

// interactiveTransfer is today's best interactive transfer: one
// transaction that locks both accounts in key order, checks the balance
// and writes both.
func interactiveTransfer(ctx context.Context, p *pgxpool.Pool, tr hotrow.Transfer[int64]) error {
	return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `SELECT id, v FROM stock WHERE id = ANY($1) ORDER BY id FOR UPDATE`, []int64{tr.From, tr.To})
		bal := map[int64]int64{}
		var id, v int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &v}, func() error { bal[id] = v; return nil }); err != nil {
			return err
		}
		if bal[tr.From] < tr.Amount {
			return hotrow.ErrInsufficient
		}
		if _, err := tx.Exec(ctx, `UPDATE stock SET v = v - $2 WHERE id = $1`, tr.From, tr.Amount); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE stock SET v = v + $2 WHERE id = $1`, tr.To, tr.Amount)
		return err
	})
}
