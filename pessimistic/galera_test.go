package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/galeratest"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

// Galera: the MariaDB work with the clients' connections spread over the
// three nodes of a MariaDB Galera cluster (galeratest.Cluster.Pool). A row
// lock there is one node's: SELECT … FOR UPDATE on node A does not wait
// for the same lock held on node B, both transactions write, and the one
// that commits second fails certification (1213 at COMMIT, or at its next
// statement when the winner's write, applied on its node, needs its
// locks). InTx runs such a transaction again as a whole.
//
// The tests do not run in parallel: the conflict counters they report are
// the cluster's, and so are counted for whatever runs on it meanwhile.

// openGalera returns a fresh database on the cluster holding the example
// tables and what setup (statements run on the first node) adds, applied
// on every node; its Pool holds up to maxConns connections.
func openGalera(t *testing.T, maxConns int, setup ...string) *galeratest.Cluster {
	t.Helper()
	c := galeratest.New(t)
	c.Pool.SetMaxOpenConns(maxConns)
	c.Pool.SetMaxIdleConns(maxConns)
	galeraExec(t, c, append([]string{myDDL}, setup...)...)
	return c
}

// galeraExec runs stmts on the first node, then waits until every node
// has applied them, so that the test's clients find them on any node.
func galeraExec(t *testing.T, c *galeratest.Cluster, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := c.Nodes[0].ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	c.Sync(t)
}

// galeraStrategy is a strategy of the cluster tests: read returns the
// column of the rows ids of table, in key order, locked its way.
type galeraStrategy struct {
	name string
	opts pessimistic.Options
	read func(ctx context.Context, tx *sql.Tx, table, column string, ids ...int64) ([]int64, error)
}

// galeraStrategies are the MariaDB strategies of strategies(true), row by
// row in key order, and LockRows: every row locked in one statement in key
// order, then read.
func galeraStrategies() []galeraStrategy {
	var out []galeraStrategy
	for _, s := range strategies(true) {
		out = append(out, galeraStrategy{s.name, s.opts, func(ctx context.Context, tx *sql.Tx, table, column string, ids ...int64) ([]int64, error) {
			v := make([]int64, len(ids))
			for i, id := range ids {
				var err error
				if v[i], err = s.myRead(ctx, tx, "SELECT "+column+" FROM "+table+" WHERE id = ?", id); err != nil {
					return nil, err
				}
			}
			return v, nil
		}})
	}
	return append(out, galeraStrategy{"LockRows", pessimistic.Options{Retry: testRetry}, func(ctx context.Context, tx *sql.Tx, table, column string, ids ...int64) ([]int64, error) {
		if _, err := pessimisticmysql.LockRows(ctx, tx, table, "id", ids, pessimistic.Lock{}); err != nil {
			return nil, err
		}
		v := make([]int64, len(ids))
		for i, id := range ids {
			if err := tx.QueryRowContext(ctx, "SELECT "+column+" FROM "+table+" WHERE id = ?", id).Scan(&v[i]); err != nil {
				return nil, err
			}
		}
		return v, nil
	}})
}

const (
	galeraBuyers = 200
	galeraStock  = 3
)

// TestGaleraOversell: 200 buyers, each on its own connection (a third on
// each node), released together, race for a stock of 3 under every
// strategy: exactly 3 buy, 197 are told sold out, nothing else fails, the
// stock ends at 0. Under ForUpdate the nodes must have conflicted
// (certification failures or brute-force aborts, counted by the cluster),
// and the conflicts must show as InTx's own retries — one server never
// fails a buyer there (they queue on the lock) — or the test proved
// nothing about the cluster; the other strategies' counts are logged (a
// NoWait buyer mostly fails fast on its own node: 6 to 11 in trials).
func TestGaleraOversell(t *testing.T) {
	c := openGalera(t, galeraBuyers+2)
	for _, s := range galeraStrategies() {
		t.Run(s.name, func(t *testing.T) {
			galeraExec(t, c, "DELETE FROM inventory", fmt.Sprintf("INSERT INTO inventory (id, sku, stock) VALUES (1, 'last-three', %d)", galeraStock))
			var o outcome
			ctx := withCounting(t.Context(), &o)
			start := time.Now()
			conflicts := c.Counted(t, s.name, func() {
				gt := newGate(galeraBuyers)
				var wg sync.WaitGroup
				for range galeraBuyers {
					wg.Go(func() {
						conn, err := c.Pool.Conn(ctx)
						if err != nil {
							gt.wait()
							o.record(err)
							return
						}
						defer conn.Close()
						gt.wait()
						o.record(pessimisticmysql.InTx(ctx, conn, &s.opts, func(ctx context.Context, tx *sql.Tx) error {
							stock, err := s.read(ctx, tx, "inventory", "stock", 1)
							if err != nil {
								return err
							}
							if stock[0] < 1 {
								return errSoldOut
							}
							_, err = tx.ExecContext(ctx, "UPDATE inventory SET stock = stock - 1 WHERE id = ?", 1)
							return err
						}))
					})
				}
				gt.start()
				wg.Wait()
			})
			var stock int64
			if err := c.Synced.QueryRowContext(t.Context(), "SELECT stock FROM inventory WHERE id = 1").Scan(&stock); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: ok=%d soldOut=%d other=%d retries=%d stock=%d in %v",
				s.name, o.ok.Load(), o.soldOut.Load(), o.other.Load(), o.retries.Load(), stock, time.Since(start).Round(time.Millisecond))
			if o.ok.Load() != galeraStock || o.soldOut.Load() != galeraBuyers-galeraStock || o.other.Load() != 0 || stock != 0 {
				t.Errorf("want ok=%d soldOut=%d other=0 stock=0; first other error: %v", galeraStock, galeraBuyers-galeraStock, o.firstOther.Load())
			}
			if s.name == "ForUpdate" && (conflicts == 0 || o.retries.Load() == 0) {
				t.Errorf("%d conflicts, %d retries: the buyers did not conflict across nodes", conflicts, o.retries.Load())
			}
		})
	}
}

// Transfers on the cluster: galeraWorkers workers × galeraTransfers
// transfers between the 4 accounts of a group, each transfer locking both
// rows the strategy's way in key order, checking the balance, writing
// both rows and a record of itself in one InTx.
const (
	galeraWorkers   = 9
	galeraTransfers = 40
	galeraGroups    = 3 // groups of accountsN accounts, one per node
)

var errNoFunds = errors.New("insufficient funds")

// TestGaleraTransfers runs the transfers of every strategy twice:
//
//   - homed: the accounts are in three groups, each written only through
//     one node (the workers of group g are on node g+1): all three nodes
//     take writes at once, each row from one node. Exact: every account
//     holds its opening balance plus the acknowledged net, none is
//     negative, money is conserved, and the records are exactly the
//     acknowledged transfers (each applied once).
//   - spread: every transfer on the next connection of the pool, so the
//     four accounts are written from all three nodes at once. InTx's own
//     contract holds and is asserted — certification failures are retried
//     as one unit, nothing else fails, and the records are exactly the
//     acknowledged transfers — but the balances are only logged: MariaDB
//     Galera loses updates of transactions that write several rows from
//     several nodes (Jepsen's P4, MDEV-38974…; see the package
//     documentation), so the sums drift now and then whatever the client
//     does.
func TestGaleraTransfers(t *testing.T) {
	c := openGalera(t, galeraWorkers+2,
		"CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE transfers (id BIGINT PRIMARY KEY, src BIGINT NOT NULL, dst BIGINT NOT NULL, amount BIGINT NOT NULL) ENGINE=InnoDB")
	for _, s := range galeraStrategies() {
		for _, homed := range []bool{true, false} {
			name := s.name + "/spread"
			if homed {
				name = s.name + "/homed"
			}
			t.Run(name, func(t *testing.T) {
				galeraExec(t, c, "DELETE FROM accounts", "DELETE FROM transfers",
					fmt.Sprintf("INSERT INTO accounts (id, balance) SELECT seq, %d FROM seq_1_to_%d", startBalance, galeraGroups*accountsN))
				ctx, retries := retryCounts(t.Context())
				var b books
				start := time.Now()
				conflicts := c.Counted(t, name, func() {
					var wg sync.WaitGroup
					errs := make([]error, galeraWorkers)
					for w := range galeraWorkers {
						db, base := c.Pool, int64(0)
						if homed {
							db, base = c.Nodes[w%galeraGroups], int64(w%galeraGroups*accountsN)
						}
						r := rand.New(rand.NewPCG(uint64(w), 19))
						wg.Go(func() {
							for i := range galeraTransfers {
								id := int64(w*galeraTransfers + i)
								from, to, amount := pair(r)
								from, to = from+base, to+base
								err := pessimisticmysql.InTx(ctx, db, &s.opts, func(ctx context.Context, tx *sql.Tx) error {
									ids := []int64{min(from, to), max(from, to)}
									v, err := s.read(ctx, tx, "accounts", "balance", ids...)
									if err != nil {
										return err
									}
									if v[slices.Index(ids, from)] < amount {
										return errNoFunds
									}
									return transferRows(ctx, tx, id, from, to, amount)
								})
								if errs[w] = b.record(err, id, from, to, amount); errs[w] != nil {
									return
								}
							}
						})
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						t.Fatal(err)
					}
				})
				t.Logf("%s: %d transfers acknowledged, %d refused; retries %s; in %v", name, len(b.acked), b.refused, retries(), time.Since(start).Round(time.Millisecond))
				b.check(t, c.Synced, homed)
				if !homed && conflicts == 0 {
					t.Error("no certification failure and no brute-force abort: the transfers did not conflict across nodes")
				}
			})
		}
	}
}

// transferRows moves amount from one account to the other and records
// transfer id.
func transferRows(ctx context.Context, tx *sql.Tx, id, from, to, amount int64) error {
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"UPDATE accounts SET balance = balance - ? WHERE id = ?", []any{amount, from}},
		{"UPDATE accounts SET balance = balance + ? WHERE id = ?", []any{amount, to}},
		{"INSERT INTO transfers (id, src, dst, amount) VALUES (?, ?, ?, ?)", []any{id, from, to, amount}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			return err
		}
	}
	return nil
}

// books are the acknowledged transfers of a run.
type books struct {
	mu      sync.Mutex
	net     map[int64]int64
	acked   []int64
	refused int
}

// record counts the outcome of transfer id; any error but errNoFunds is
// returned.
func (b *books) record(err error, id, from, to, amount int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		if b.net == nil {
			b.net = map[int64]int64{}
		}
		b.net[from] -= amount
		b.net[to] += amount
		b.acked = append(b.acked, id)
	case errors.Is(err, errNoFunds):
		b.refused++
	default:
		return fmt.Errorf("transfer %d: %w", id, err)
	}
	return nil
}

// check reads the accounts and records through synced and asserts that
// the records are exactly the acknowledged transfers (each applied once);
// with exact, also that every account holds its opening balance plus the
// acknowledged net, that none is negative and that money is conserved —
// otherwise it logs how far the balances are from that.
func (b *books) check(t *testing.T, synced *sql.DB, exact bool) {
	t.Helper()
	ctx := t.Context()
	recorded := queryInts(t, synced, "SELECT id FROM transfers ORDER BY id")
	slices.Sort(b.acked)
	if !slices.Equal(recorded, b.acked) {
		t.Errorf("%d transfers recorded, %d acknowledged: want the same transfers", len(recorded), len(b.acked))
	}
	var total, drift int64
	var off []string
	for id := int64(1); id <= galeraGroups*accountsN; id++ {
		var bal int64
		if err := synced.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ?", id).Scan(&bal); err != nil {
			t.Fatal(err)
		}
		total += bal
		if want := startBalance + b.net[id]; bal != want || bal < 0 {
			off = append(off, fmt.Sprintf("account %d holds %d, want %d (opening %d + acknowledged net %d)", id, bal, want, startBalance, b.net[id]))
			drift += bal - want
		}
	}
	switch {
	case exact && (len(off) > 0 || total != galeraGroups*accountsN*startBalance):
		t.Errorf("books wrong, total %d: %v", total, off)
	case len(off) > 0:
		t.Logf("Galera lost updates: total %d (drift %+d): %v", total, drift, off)
	}
}

// queryInts returns the one-column integer rows of q.
func queryInts(t *testing.T, db *sql.DB, q string) []int64 {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGaleraClaimJobs: 8 workers claim 200 jobs in batches of 5 with SKIP
// LOCKED, each first claim held until every worker holds one, on
// connections of every node. SKIP LOCKED skips only the locks of its own
// node, so the first batches are handed to a worker on each node; all but
// one of those claims fail certification and run again. No job is claimed
// twice, every job is claimed, and the double hand-outs really happened.
func TestGaleraClaimJobs(t *testing.T) {
	// Explicit ids: Galera's auto-increment steps by the cluster size.
	c := openGalera(t, claimers+2, "INSERT INTO jobs (id, payload) SELECT seq, CONCAT('job-', LPAD(seq, 3, '0')) FROM seq_1_to_200")
	var retries atomic.Int64
	ctx := observe.WithHooks(t.Context(), &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			retries.Add(1)
		}
	}})
	claimed := make([][]pessimistic.Job, claimers)
	var mu sync.Mutex
	handedOut := map[int64]int{} // job → attempts that got it, committed or not
	start := time.Now()
	conflicts := c.Counted(t, "ClaimJobs", func() {
		h := newHold(claimers)
		go h.g.start()
		var wg sync.WaitGroup
		for w := range claimers {
			wg.Go(func() {
				for {
					var jobs []pessimistic.Job
					err := pessimisticmysql.InTx(ctx, c.Pool, &pessimistic.Options{Retry: testRetry}, func(ctx context.Context, tx *sql.Tx) error {
						var err error
						jobs, err = pessimisticmysql.ClaimJobs(ctx, tx, "jobs", claimBatch, &pessimistic.ClaimOptions{Worker: fmt.Sprint("w", w)})
						if err == nil {
							mu.Lock()
							for _, j := range jobs {
								handedOut[j.ID]++
							}
							mu.Unlock()
							h.at(w) // first claim: hold the locks until every worker has its batch
						}
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
					if len(jobs) == 0 {
						return
					}
					claimed[w] = append(claimed[w], jobs...)
				}
			})
		}
		wg.Wait()
	})
	checkClaims(t, claimed)
	twice := 0
	for _, n := range handedOut {
		if n > 1 {
			twice++
		}
	}
	var pending int
	if err := c.Synced.QueryRowContext(t.Context(), `SELECT COALESCE(SUM(state <> 'claimed' OR claimed_by IS NULL OR claimed_at IS NULL), 0) FROM jobs`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs handed to more than one attempt, %d retries, in %v", twice, retries.Load(), time.Since(start).Round(time.Millisecond))
	if pending != 0 {
		t.Errorf("%d jobs not claimed or without owner/time", pending)
	}
	if twice == 0 || retries.Load() == 0 || conflicts == 0 {
		t.Error("no job was handed out twice: the claims did not race across nodes")
	}
}

// TestGaleraCommitConflictRetried: two transactions on two nodes lock the
// same row FOR UPDATE — neither waits for the other — and increment it.
// The one on node 1 commits first; the one on node 2 then fails with 1213
// at its COMMIT (its closure had returned nil), which InTx reports to the
// retry hook as ErrDeadlock, never as an ambiguous commit, and runs again
// as a whole: the second attempt reads the first one's increment and the
// row ends at 2.
func TestGaleraCommitConflictRetried(t *testing.T) {
	c := openGalera(t, 2, "INSERT INTO counters (id, value) VALUES (1, 0)")
	ctx := t.Context()
	node := func(i int) *sql.Conn {
		conn, err := c.Nodes[i].Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	n1, n2 := node(0), node(1)
	increment := func(ctx context.Context, tx *sql.Tx) (int64, error) {
		var v int64
		if err := tx.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
			return 0, err
		}
		_, err := tx.ExecContext(ctx, "UPDATE counters SET value = ? WHERE id = 1", v+1)
		return v, err
	}
	var retried []error
	rctx := observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) { retried = append(retried, e.Err) }})
	locked, committed := make(chan struct{}), make(chan error, 1)
	go func() {
		select {
		case <-locked:
		case <-ctx.Done():
			committed <- ctx.Err()
			return
		}
		committed <- pessimisticmysql.InTx(ctx, n1, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1}}, func(ctx context.Context, tx *sql.Tx) error {
			_, err := increment(ctx, tx)
			return err
		})
	}()
	var seen []int64
	returned := 0
	err := pessimisticmysql.InTx(rctx, n2, &pessimistic.Options{Retry: testRetry}, func(ctx context.Context, tx *sql.Tx) error {
		v, err := increment(ctx, tx)
		if err != nil {
			return err
		}
		seen = append(seen, v)
		if len(seen) == 1 {
			close(locked)
			// Node 1 locks the row, writes and commits while this
			// transaction holds its lock on node 2.
			if err := <-committed; err != nil {
				return fmt.Errorf("node 1: %w", err)
			}
		}
		returned++
		return nil
	})
	var v int64
	if err := c.Synced.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("node 2 read %v in its attempts, retried on %v; value %d", seen, retried, v)
	if err != nil {
		t.Fatalf("InTx on node 2: %v", err)
	}
	if !slices.Equal(seen, []int64{0, 1}) || returned != 2 || v != 2 {
		t.Fatalf("node 2's attempts read %v and returned nil %d times, value %d; want [0 1], 2 (the first attempt failed at COMMIT), 2", seen, returned, v)
	}
	if len(retried) != 1 || !errors.Is(retried[0], pessimistic.ErrDeadlock) || errors.Is(retried[0], concurkit.ErrOutcomeUnknown) {
		t.Fatalf("retried on %v; want one ErrDeadlock, not an ambiguous commit", retried)
	}
}
