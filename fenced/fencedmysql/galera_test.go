package fencedmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
	"github.com/concurkit/concurkit/fenced/internal/fencedtest"
	"github.com/concurkit/concurkit/internal/galeratest"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

// The Galera tests write on the three nodes of testkit's cluster at once.
// There a row lock taken on one node does not hold back a writer on
// another, and a node may not yet have applied a commit made on another:
// the guard's comparison runs on the node's own copy of the row, and what
// keeps a stale token out is Galera's certification — of two write sets
// touching the row, the later one fails (1213 at COMMIT, or an abort by
// the winner's applier).

// galera returns a cluster with the accounts and fence tables, ready on
// every node.
func galera(t *testing.T) *galeratest.Cluster {
	t.Helper()
	c := galeratest.New(t)
	if _, err := c.Synced.ExecContext(t.Context(), myAccounts+"; "+myFences); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	return c
}

// TestGaleraSuites runs the shared suites with every write on the pool
// spread over the nodes; the suites' reads go through the synced pool, so
// each checks what the cluster committed. ConcurrentWritersMaxTokenWins
// races 24 writers on one row from three nodes.
func TestGaleraSuites(t *testing.T) {
	t.Parallel()
	for name, suite := range map[string]func(*testing.T, fencedtest.Dialect){
		"Write": fencedtest.Write, "Update": fencedtest.Update, "VersionBump": fencedtest.VersionBump,
		"ConcurrentWritersMaxTokenWins": fencedtest.ConcurrentWritersMaxTokenWins,
	} {
		t.Run(name, func(t *testing.T) {
			c := galera(t)
			d := dialectOn(c.Synced)
			spread := dialectOn(c.Pool)
			d.Write, d.Update = spread.Write, spread.Update
			c.Counted(t, name, func() { suite(t, d) })
		})
	}
}

// galeraEntry is a guarded entry point for the Galera tests: write runs it
// on h with token tok, the data (for Write and Update) depending only on
// the token, so a holder repeating its write rewrites identical values.
type galeraEntry struct {
	name  string
	write func(ctx context.Context, h fencedmysql.DBTX, key int64, tok fenced.Token) error
	// read returns the stored token and, for accounts, the owner.
	read func(ctx context.Context, db *sql.DB, key int64) (string, int64, error)
}

func galeraEntries() []galeraEntry {
	readAccount := func(ctx context.Context, db *sql.DB, key int64) (o string, tk int64, err error) {
		err = db.QueryRowContext(ctx, "SELECT owner, max_seen_token FROM accounts WHERE id = ?", key).Scan(&o, &tk)
		return
	}
	owner := func(tok fenced.Token) string { return fmt.Sprint("holder-", tok) }
	return []galeraEntry{
		{"Write", func(ctx context.Context, h fencedmysql.DBTX, key int64, tok fenced.Token) error {
			return fencedmysql.Write(ctx, h, accounts, key, tok, set(owner(tok), int64(tok)))
		}, readAccount},
		{"Update", func(ctx context.Context, h fencedmysql.DBTX, key int64, tok fenced.Token) error {
			return fencedmysql.Update(ctx, h, accounts, key, tok, set(owner(tok), int64(tok)))
		}, readAccount},
		{"Admit", func(ctx context.Context, h fencedmysql.DBTX, key int64, tok fenced.Token) error {
			return fencedmysql.Admit(ctx, h, fenced.Fence{}, fmt.Sprint(key), tok)
		}, func(ctx context.Context, db *sql.DB, key int64) (string, int64, error) {
			var tk int64
			err := db.QueryRowContext(ctx, "SELECT max_seen_token FROM concurkit_fences WHERE resource = ?", fmt.Sprint(key)).Scan(&tk)
			return fmt.Sprint("holder-", tk), tk, err
		}},
	}
}

// TestGaleraStaleHolderInTransaction forces the cross-node interleaving
// in a transaction, for Write, Update and Admit: the old holder, on node
// 2, has its write accepted by that node (which has not seen the newer
// token: it is not committed yet) and keeps its transaction open; the new
// holder writes on node 1 and commits, unhindered by node 2's row lock.
// The old holder's COMMIT must then fail — with 1213, a definite failure,
// not an unknown outcome — and its transaction run again must be refused
// with ErrStaleToken.
//
// Two cases: the old holder's token is lower than the stored one it
// overwrites ("stale write"), or equal to it, its values identical
// ("repeated write": the statement changes nothing, and only a locking
// read tells the outcome — a read that on Galera neither blocks the new
// holder nor is certified).
func TestGaleraStaleHolderInTransaction(t *testing.T) {
	t.Parallel()
	c := galera(t)
	ctx := t.Context()
	old, newer := c.Nodes[1], c.Nodes[0]
	var key int64
	conflicts := c.Counted(t, "stale holders in transactions", func() {
		for _, e := range galeraEntries() {
			for _, tc := range []struct {
				name             string
				stored, tok, new fenced.Token
			}{
				{"stale write", 3, 5, 9},
				{"repeated write", 9, 9, 12},
			} {
				t.Run(e.name+"/"+tc.name, func(t *testing.T) {
					key++
					if _, err := c.Synced.ExecContext(ctx, "INSERT INTO accounts (id) VALUES (?)", key); err != nil {
						t.Fatal(err)
					}
					if err := e.write(ctx, c.Synced, key, tc.stored); err != nil {
						t.Fatal(err)
					}
					c.Sync(t)

					tx, err := old.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					if err := e.write(ctx, tx, key, tc.tok); err != nil {
						t.Fatalf("the old holder's write on its node: %v (the node has not seen a newer token)", err)
					}
					if err := e.write(ctx, newer, key, tc.new); err != nil {
						t.Fatalf("the new holder's write on another node: %v", err)
					}
					err = tx.Commit()
					var amb *concurkit.AmbiguousCommitError
					if err == nil || mysqlerr.Number(err) != sqlerr.MySQLDeadlock || errors.As(err, &amb) {
						t.Fatalf("the old holder's COMMIT after the new holder's = %v; want 1213, a definite failure", err)
					}
					// Run as one unit again (pessimisticmysql.InTx retries a
					// 1213): the token is now stale.
					err = pessimisticmysql.InTx(ctx, old, nil, func(ctx context.Context, tx *sql.Tx) error {
						return e.write(ctx, tx, key, tc.tok)
					})
					if !errors.Is(err, fenced.ErrStaleToken) {
						t.Fatalf("the old holder's retry = %v, want ErrStaleToken", err)
					}
					if o, tok, err := e.read(ctx, c.Synced, key); err != nil || tok != int64(tc.new) || o != fmt.Sprint("holder-", tc.new) {
						t.Fatalf("stored (%q, %d), %v; want the new holder's token %d", o, tok, err, tc.new)
					}
				})
			}
		}
	})
	if conflicts == 0 {
		t.Error("no certification failure or abort: the old holders' transactions did not conflict with the new ones")
	}
}

// TestGaleraLaggingNode: on autocommit (a *sql.DB per node), a holder's
// token is superseded on node 1, and the holder writes again at once on
// node 3, which may not have applied the newer token yet — a write with
// another value (the guard passes on the node's old row, and
// certification must refuse it) and a repetition of its last write
// (identical values, equal token: nothing changes on the node, and
// nothing is certified). Every one must be ErrStaleToken, and the row
// must keep the newer token's data.
func TestGaleraLaggingNode(t *testing.T) {
	t.Parallel()
	c := galera(t)
	ctx := t.Context()
	const rounds = 50
	first, second, third := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	start := time.Now()
	c.Counted(t, "writes on a lagging node", func() {
		for i, e := range galeraEntries() {
			key := int64(100 + i)
			if _, err := c.Synced.ExecContext(ctx, "INSERT INTO accounts (id) VALUES (?)", key); err != nil {
				t.Fatal(err)
			}
			c.Sync(t)
			stale := map[string]int{}
			for r := range rounds {
				holder, successor := fenced.Token(2*r+1), fenced.Token(2*r+2)
				if err := e.write(ctx, first, key, holder); err != nil {
					t.Fatalf("%s round %d: holder %d: %v", e.name, r, holder, err)
				}
				if err := e.write(ctx, second, key, successor); err != nil {
					t.Fatalf("%s round %d: successor %d: %v", e.name, r, successor, err)
				}
				for _, w := range []struct {
					name string
					tok  fenced.Token
				}{{"repeated", holder}, {"lower", holder - 1}} {
					if w.tok < 1 {
						continue
					}
					err := e.write(ctx, third, key, w.tok)
					if !errors.Is(err, fenced.ErrStaleToken) {
						t.Fatalf("%s round %d: %s write with token %d after %d was accepted on another node = %v, want ErrStaleToken", e.name, r, w.name, w.tok, successor, err)
					}
					stale[w.name]++
				}
			}
			if o, tok, err := e.read(ctx, c.Synced, key); err != nil || tok != 2*rounds || o != fmt.Sprint("holder-", 2*rounds) {
				t.Fatalf("%s: stored (%q, %d), %v; want the last successor's", e.name, o, tok, err)
			}
			t.Logf("%s: %d rounds, refused %v", e.name, rounds, stale)
		}
	})
	t.Logf("%v", time.Since(start).Round(time.Millisecond))
}

// TestGaleraHolders: 24 holders with tokens 1…24, on the three nodes in
// turn, each do a read-modify-write of one account (SELECT … FOR UPDATE,
// then a fenced Update of amount+1, and a log row naming the token it
// replaced) in a transaction, run again after a 1213. The first three,
// one per node, all read the row before any of them writes, so at least
// two must lose at COMMIT. The accepted writes must form one chain of
// strictly increasing tokens, each replacing the one before it (no two
// built on the same read: no lost update), the amount must count them,
// and the highest token must be accepted.
func TestGaleraHolders(t *testing.T) {
	t.Parallel()
	c := galera(t)
	ctx := t.Context()
	if _, err := c.Synced.ExecContext(ctx, "CREATE TABLE fence_log (tok BIGINT PRIMARY KEY, prev BIGINT NOT NULL) ENGINE=InnoDB; INSERT INTO accounts (id) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	const holders, leads = 24, 3
	opts := &pessimistic.Options{Retry: retry.Policy{MaxElapsed: time.Minute}}
	var (
		read  sync.WaitGroup // the leads' first reads
		wg    sync.WaitGroup
		mu    sync.Mutex
		stale []int64
	)
	read.Add(leads)
	errs := make([]error, holders)
	start := time.Now()
	conflicts := c.Counted(t, "24 holders on 3 nodes", func() {
		for i := range holders {
			tok := fenced.Token(i + 1)
			node := c.Nodes[i%len(c.Nodes)]
			wg.Go(func() {
				first := i < leads
				errs[i] = pessimisticmysql.InTx(ctx, node, opts, func(ctx context.Context, tx *sql.Tx) error {
					var amount, prev int64
					if err := tx.QueryRowContext(ctx, "SELECT amount, max_seen_token FROM accounts WHERE id = 1 FOR UPDATE").Scan(&amount, &prev); err != nil {
						return mysqlerr.Mark(err)
					}
					if first {
						first = false
						read.Done()
						read.Wait()
					}
					if err := fencedmysql.Update(ctx, tx, accounts, 1, tok, map[string]any{"amount": amount + 1}); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, "INSERT INTO fence_log (tok, prev) VALUES (?, ?)", int64(tok), prev)
					return mysqlerr.Mark(err)
				})
				if errors.Is(errs[i], fenced.ErrStaleToken) {
					mu.Lock()
					stale = append(stale, int64(tok))
					mu.Unlock()
					errs[i] = nil
				}
			})
		}
		wg.Wait()
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("holder %d: %v", i+1, err)
		}
	}
	type entry struct{ tok, prev int64 }
	var chain []entry
	rows, err := c.Synced.QueryContext(ctx, "SELECT tok, prev FROM fence_log ORDER BY tok")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.tok, &e.prev); err != nil {
			t.Fatal(err)
		}
		chain = append(chain, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var prev int64
	for _, e := range chain {
		if e.prev != prev {
			t.Errorf("token %d replaced token %d, want %d: accepted tokens %v do not form one chain", e.tok, e.prev, prev, chain)
		}
		prev = e.tok
	}
	if len(chain)+len(stale) != holders || prev != holders {
		t.Errorf("%d accepted, %d stale (%v), last accepted %d; want all %d holders accounted for and the last one accepted", len(chain), len(stale), stale, prev, holders)
	}
	for _, s := range stale {
		if !slices.ContainsFunc(chain, func(e entry) bool { return e.tok > s }) {
			t.Errorf("token %d refused, but no higher token was accepted", s)
		}
	}
	var amount, tok int64
	if err := c.Synced.QueryRowContext(ctx, "SELECT amount, max_seen_token FROM accounts WHERE id = 1").Scan(&amount, &tok); err != nil {
		t.Fatal(err)
	}
	if amount != int64(len(chain)) || tok != holders {
		t.Errorf("amount %d, token %d; want %d accepted increments and token %d", amount, tok, len(chain), holders)
	}
	if conflicts == 0 {
		t.Error("no certification failure or abort: the holders did not race across nodes")
	}
	t.Logf("%d holders in %v: %d accepted in one chain, %d refused as stale", holders, time.Since(start).Round(time.Millisecond), len(chain), len(stale))
}

// TestGaleraSequence: CreateSequence makes a sequence Galera accepts
// (NOCACHE), and Next refuses to draw tokens from it: each node's copy
// of a sequence hands out the same values.
func TestGaleraSequence(t *testing.T) {
	t.Parallel()
	c := galera(t)
	ctx := t.Context()
	if err := fencedmysql.CreateSequence(ctx, c.Synced, "tokens"); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	src, err := fencedmysql.NewSequence(c.Pool, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // asked, then remembered
		if tok, err := src.Next(ctx); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Fatalf("Next on Galera = %d, %v; want an error matching ErrInvalidArgument", tok, err)
		}
	}
}
