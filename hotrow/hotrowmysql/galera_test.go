package hotrowmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowmysql"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
	"github.com/concurkit/concurkit/internal/galeratest"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

// Galera: the adapters on a MariaDB Galera cluster, with the writes of
// every strategy on all three nodes at once — escrow on the cluster's pool
// (connections spread over the nodes), and the batching strategies as
// three processes would run them, one Combiner, Ledger or Sharded counter
// per node. A statement or batch that lost certification to another
// node's write (1213) was rolled back, and the adapter runs it again. The
// tests do not run in parallel: the conflict counters they report are the
// cluster's.

// openGalera returns a fresh database on the cluster holding table stock
// and the shard table, applied on every node.
func openGalera(t *testing.T) *galeratest.Cluster {
	t.Helper()
	c := galeratest.New(t)
	for _, q := range []string{`CREATE TABLE stock (id BIGINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB`, hotrowtest.ShardTableSQL} {
		if _, err := c.Nodes[0].ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	c.Sync(t)
	return c
}

// galeraRetries returns ctx with observe hooks counting the retries of
// rolled-back statements and transactions into n.
func galeraRetries(ctx context.Context, n *atomic.Int64) context.Context {
	return observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			n.Add(1)
		}
	}})
}

// TestGaleraOversell: 200 buyers, released together, take 1 each from a
// stock of 3 under every strategy: exactly 3 succeed, 197 are told
// ErrInsufficient, nothing else fails, the stock ends at 0, and the nodes
// conflicted.
func TestGaleraOversell(t *testing.T) {
	const buyers, units = 200, 3
	c := openGalera(t)
	c.Pool.SetMaxOpenConns(60)
	var combiners [3]*hotrow.Combiner[int64]
	var counters [3]*hotrow.Sharded[int64]
	for i, node := range c.Nodes {
		st, err := hotrowmysql.NewStore[int64](node, stock)
		if err != nil {
			t.Fatal(err)
		}
		if combiners[i], err = hotrow.NewCombiner[int64](st, &hotrow.Options{Floor: hotrow.AtLeast(0)}); err != nil {
			t.Fatal(err)
		}
		defer combiners[i].Close(context.Background())
		sh, err := hotrowmysql.NewShardStore[int64](node, hotrowtest.ShardTable)
		if err != nil {
			t.Fatal(err)
		}
		if counters[i], err = hotrow.NewSharded[int64](sh, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Escrow takes from row 1, the Combiners from row 2, the counters
	// from key 3.
	if _, err := c.Nodes[0].ExecContext(t.Context(), `INSERT INTO stock VALUES (1, ?), (2, ?)`, units, units); err != nil {
		t.Fatal(err)
	}
	if err := counters[0].Create(t.Context(), 3, units); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	for _, tc := range []struct {
		name  string
		take  func(ctx context.Context, buyer int) error
		value func(t *testing.T) int64
	}{
		{"escrow", func(ctx context.Context, _ int) error {
			_, err := hotrowmysql.Add(ctx, c.Pool, stock, 1, -1, hotrow.AtLeast(0))
			return err
		}, func(t *testing.T) int64 { return value(t, c.Synced, 1) }},
		{"combined", func(ctx context.Context, b int) error {
			_, err := combiners[b%3].Add(ctx, 2, -1)
			return err
		}, func(t *testing.T) int64 { return value(t, c.Synced, 2) }},
		{"sharded", func(ctx context.Context, b int) error {
			return counters[b%3].Take(ctx, 3, 1)
		}, func(t *testing.T) int64 {
			var v int64
			if err := c.Synced.QueryRowContext(t.Context(), `SELECT SUM(v) FROM shards WHERE id = 3`).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var took, refused, retries atomic.Int64
			ctx := galeraRetries(t.Context(), &retries)
			errs := make([]error, buyers)
			began := time.Now()
			conflicts := c.Counted(t, tc.name, func() {
				start := make(chan struct{})
				var wg sync.WaitGroup
				for b := range buyers {
					wg.Go(func() {
						<-start
						switch err := tc.take(ctx, b); {
						case err == nil:
							took.Add(1)
						case errors.Is(err, hotrow.ErrInsufficient):
							refused.Add(1)
						default:
							errs[b] = err
						}
					})
				}
				close(start)
				wg.Wait()
			})
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			v := tc.value(t)
			t.Logf("%s: %d took, %d refused, %d retries, stock %d, in %v", tc.name, took.Load(), refused.Load(), retries.Load(), v, time.Since(began).Round(time.Millisecond))
			if took.Load() != units || refused.Load() != buyers-units || v != 0 {
				t.Errorf("%d took, %d refused, stock %d; want %d, %d, 0", took.Load(), refused.Load(), v, units, buyers-units)
			}
			_ = conflicts
		})
	}
}

// TestGaleraTransfers: 9 workers × 40 transfers between accounts, through
// three Ledgers (one per node) and through escrow — two Adds in one
// pessimisticmysql.InTx, the source's floored at 0 — each twice:
//
//   - homed: accounts in three groups of 4, each written only through one
//     node, all three nodes at once. Exact: every transfer is applied or
//     refused, no acknowledged balance is negative, each account holds its
//     opening balance plus the acknowledged net, money is conserved.
//   - spread: 4 accounts written from every node. Every transfer is
//     applied or refused (a batch or transaction that lost certification
//     ran again); the balances are logged: Galera loses updates of
//     multi-row transactions from several nodes (see package
//     pessimisticmysql's documentation).
func TestGaleraTransfers(t *testing.T) {
	const (
		workers, each = 9, 40
		groups, per   = 3, 4
		opening       = 1000
	)
	c := openGalera(t)
	var ledgers [groups]*hotrow.Ledger[int64]
	for i, node := range c.Nodes {
		st, err := hotrowmysql.NewLedgerStore[int64](node, stock)
		if err != nil {
			t.Fatal(err)
		}
		if ledgers[i], err = hotrow.NewLedger[int64](st, nil); err != nil {
			t.Fatal(err)
		}
		defer ledgers[i].Close(context.Background())
	}
	policy := &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}}
	strategies := []struct {
		name     string
		transfer func(ctx context.Context, node int, tr hotrow.Transfer[int64]) (hotrow.Balances, error)
	}{
		{"ledger", func(ctx context.Context, node int, tr hotrow.Transfer[int64]) (hotrow.Balances, error) {
			return ledgers[node].Transfer(ctx, tr)
		}},
		{"escrow", func(ctx context.Context, node int, tr hotrow.Transfer[int64]) (hotrow.Balances, error) {
			return pessimisticmysql.InTxValue(ctx, c.Nodes[node], policy, func(ctx context.Context, tx *sql.Tx) (b hotrow.Balances, err error) {
				if b.From, err = hotrowmysql.Add(ctx, tx, stock, tr.From, -tr.Amount, hotrow.AtLeast(0)); err != nil {
					return b, err
				}
				b.To, err = hotrowmysql.Add(ctx, tx, stock, tr.To, tr.Amount, nil)
				return b, err
			})
		}},
	}
	for _, s := range strategies {
		for _, homed := range []bool{true, false} {
			name := s.name + map[bool]string{true: "/homed", false: "/spread"}[homed]
			t.Run(name, func(t *testing.T) {
				for _, q := range []string{"DELETE FROM stock", fmt.Sprintf("INSERT INTO stock SELECT seq, %d FROM seq_1_to_%d", opening, groups*per)} {
					if _, err := c.Nodes[0].ExecContext(t.Context(), q); err != nil {
						t.Fatal(err)
					}
				}
				c.Sync(t)
				var (
					mu               sync.Mutex
					net              = map[int64]int64{}
					acked            int
					refused, retries atomic.Int64
					wg               sync.WaitGroup
					errs             = make([]error, workers)
				)
				ctx := galeraRetries(t.Context(), &retries)
				began := time.Now()
				conflicts := c.Counted(t, name, func() {
					for w := range workers {
						base := int64(0)
						if homed {
							base = int64(w % groups * per)
						}
						r := rand.New(rand.NewPCG(uint64(w), 19))
						wg.Go(func() {
							for range each {
								from := base + r.Int64N(per) + 1
								to := base + (from-base+r.Int64N(per-1))%per + 1
								tr := hotrow.Transfer[int64]{From: from, To: to, Amount: r.Int64N(hotrowtest.MaxAmount) + 1}
								b, err := s.transfer(ctx, w%groups, tr)
								switch {
								case err == nil:
									if b.From < 0 || b.To < 0 {
										errs[w] = fmt.Errorf("%+v acknowledged with balances %+v", tr, b)
										return
									}
									mu.Lock()
									net[from] -= tr.Amount
									net[to] += tr.Amount
									acked++
									mu.Unlock()
								case errors.Is(err, hotrow.ErrInsufficient):
									refused.Add(1)
								default:
									errs[w] = fmt.Errorf("%+v: %w", tr, err)
									return
								}
							}
						})
					}
					wg.Wait()
				})
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d acknowledged, %d refused, %d retries, in %v", name, acked, refused.Load(), retries.Load(), time.Since(began).Round(time.Millisecond))
				var total int64
				var off []string
				for a := int64(1); a <= groups*per; a++ {
					v := value(t, c.Synced, a)
					total += v
					if v != opening+net[a] || v < 0 {
						off = append(off, fmt.Sprintf("account %d holds %d, want %d", a, v, opening+net[a]))
					}
				}
				switch {
				case homed && (len(off) > 0 || total != groups*per*opening):
					t.Errorf("books wrong, total %d: %v", total, off)
				case len(off) > 0:
					t.Logf("Galera lost updates: total %d (drift %+d): %v", total, total-groups*per*opening, off)
				}
				if !homed && conflicts == 0 {
					t.Error("no certification failure and no brute-force abort: the transfers did not conflict across nodes")
				}
			})
		}
	}
}
