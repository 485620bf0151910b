package idempotencymysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/internal/galeratest"
	"github.com/concurkit/concurkit/migrations"
)

// The Galera tests run the store on testkit's three-node cluster through
// a pool whose connections go to the nodes in turn, with the server's
// defaults (wsrep_sync_wait = 0): a claim, the read after it, the run's
// completion and the next client's claim may each land on another node,
// one that has not yet applied the commit before. Locks do not hold back
// a claim on another node; of concurrent claims of a key, the first to
// commit wins and the others fail certification (1213, retried). The
// tests' own counters and checks go through the synced pool.

// galeraEnv returns a cluster with the toolkit migrations and the suite's
// counter table, and the Env of a Store on the spread pool.
func galeraEnv(t *testing.T) (*galeratest.Cluster, idemtest.Env) {
	t.Helper()
	c := galeratest.New(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, c.DSNs[0]); err != nil {
		t.Fatal(err)
	}
	s, err := idempotencymysql.New(c.Pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := idemtest.MySQLEnv(t, c.Synced, s)
	c.Sync(t)
	return c, env
}

// TestGalera runs the suite's sequential and concurrent tests with the
// store's statements spread over the nodes. Concurrent sends each key's
// duplicates at once through the middleware, ConcurrentClaims through Do:
// each key's effect happens once, every client gets the one stored
// response or 409.
func TestGalera(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, env idemtest.Env)
	}{
		{"Do", idemtest.Do},
		{"Expiry", idemtest.Expiry},
		{"TakeOver", idemtest.TakeOver},
		{"Concurrent", func(t *testing.T, env idemtest.Env) { idemtest.Concurrent(t, env, 40, 6) }},
		{"ConcurrentClaims", func(t *testing.T, env idemtest.Env) { idemtest.ConcurrentClaims(t, env.Store, 10, 6) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, env := galeraEnv(t)
			start := time.Now()
			c.Counted(t, tc.name, func() { tc.run(t, env) })
			t.Logf("%s in %v", tc.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestGaleraClaimRace proves that claims race across nodes: round after
// round, six Do calls of a fresh key, two per node, start together, until
// the cluster has counted a certification failure or abort (two claims
// ran on their nodes before either was applied on the other's) — at
// most 100 rounds. In every round fn runs once, every call returns its
// value or ErrInProgress, and a call afterwards replays the value.
func TestGaleraClaimRace(t *testing.T) {
	t.Parallel()
	c, _ := galeraEnv(t)
	ctx := t.Context()
	var stores []*idempotencymysql.Store
	for _, n := range c.Nodes {
		s, err := idempotencymysql.New(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	const calls, maxRounds = 6, 100
	before := c.Conflicts(t)
	round := 0
	for ; round < maxRounds && (round < 5 || c.Conflicts(t) == before); round++ {
		key := fmt.Sprint("race-", round)
		var runs atomic.Int64
		errs := make([]error, calls)
		vals := make([]string, calls)
		barrier := make(chan struct{})
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				<-barrier
				vals[i], _, errs[i] = idempotency.Do(ctx, stores[i%len(stores)], "", key, nil, nil, func(context.Context) (string, error) {
					runs.Add(1)
					return "value of " + key, nil
				})
			})
		}
		close(barrier)
		wg.Wait()
		if runs.Load() != 1 {
			t.Fatalf("%s: fn ran %d times, want once", key, runs.Load())
		}
		for i, err := range errs {
			if err != nil && !errors.Is(err, idempotency.ErrInProgress) || err == nil && vals[i] != "value of "+key {
				t.Fatalf("%s call %d: %q, %v; want the value or ErrInProgress", key, i, vals[i], err)
			}
		}
		v, replayed, err := idempotency.Do(ctx, stores[round%len(stores)], "", key, nil, nil, func(context.Context) (string, error) {
			return "", errors.New("ran again")
		})
		if err != nil || !replayed || v != "value of "+key {
			t.Fatalf("%s: a call afterwards = %q, replayed %v, %v; want the replayed value", key, v, replayed, err)
		}
	}
	n := c.Conflicts(t) - before
	t.Logf("%d rounds of %d concurrent claims on %d nodes: %d certification failures and brute-force aborts on the cluster", round, calls, len(c.Nodes), n)
	if n == 0 {
		t.Errorf("no certification failure or abort in %d rounds: the claims never raced across nodes", round)
	}
}

// galeraPhaseEnv is newPhaseEnv on the cluster: the store and the phases'
// transactions on the spread pool, the checks on the synced one; KillTx
// kills the session on the node it runs on.
func galeraPhaseEnv(t *testing.T) idemtest.PhaseEnv[*sql.Tx] {
	t.Helper()
	c := galeratest.New(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, c.DSNs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Synced.ExecContext(t.Context(), "CREATE TABLE rides (id VARBINARY(255) PRIMARY KEY, charge VARCHAR(64) NOT NULL DEFAULT '') ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	s, err := idempotencymysql.New(c.Pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := phaseEnv(s, c.Synced)
	env.KillTx = func(ctx context.Context, tx *sql.Tx) error {
		var id int64
		var node string
		if err := tx.QueryRowContext(ctx, `SELECT CONNECTION_ID(), @@port`).Scan(&id, &node); err != nil {
			return err
		}
		for i, n := range c.Nodes {
			var port string
			if err := n.QueryRowContext(ctx, `SELECT @@port`).Scan(&port); err != nil {
				return err
			}
			if port == node {
				_, err := c.Nodes[i].ExecContext(ctx, `KILL ?`, id)
				return err
			}
		}
		return fmt.Errorf("no node listens on port %s", node)
	}
	return env
}

// TestGaleraPhases runs the recovery-point tests with the phases'
// transactions spread over the nodes.
func TestGaleraPhases(t *testing.T) {
	t.Parallel()
	idemtest.Phases(t, galeraPhaseEnv)
}

// TestGaleraConcurrentPhases: for each key, six DoPhases calls, two per
// node, start together. Each key's ride is created once and charged once,
// every call returns that one receipt (run or replayed) or ErrInProgress,
// and a call after they all returned replays it.
func TestGaleraConcurrentPhases(t *testing.T) {
	t.Parallel()
	c := galeratest.New(t)
	ctx := t.Context()
	if err := migrations.Up(ctx, migrations.MySQL, c.DSNs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Synced.ExecContext(ctx, "CREATE TABLE rides (id VARBINARY(255) PRIMARY KEY, charge VARCHAR(64) NOT NULL DEFAULT '') ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	var stores []*idempotencymysql.Store
	for _, n := range c.Nodes {
		s, err := idempotencymysql.New(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	const keys, calls = 10, 6
	type receipt struct{ Ride, Charge string }
	var (
		mu      sync.Mutex
		charged = map[string]int{}
	)
	phases := []idempotency.Phase[*sql.Tx]{
		{Name: "ride_created", Run: func(ctx context.Context, tx *sql.Tx, st idempotency.Step) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO rides (id) VALUES (?)`, st.Key)
			return err
		}},
		{Name: "charged", Run: func(ctx context.Context, tx *sql.Tx, st idempotency.Step) error {
			mu.Lock()
			charged[st.DerivedKey()]++ // an outside call, idempotent by its key: it may be repeated
			mu.Unlock()
			_, err := tx.ExecContext(ctx, `UPDATE rides SET charge = ? WHERE id = ?`, "ch_"+st.Key, st.Key)
			return err
		}},
	}
	finish := func(ctx context.Context, tx *sql.Tx, st idempotency.Step) (receipt, error) {
		var r receipt
		err := tx.QueryRowContext(ctx, `SELECT id, charge FROM rides WHERE id = ?`, st.Key).Scan(&r.Ride, &r.Charge)
		return r, err
	}
	results := make([][calls]receipt, keys)
	errs := make([][calls]error, keys)
	var wg sync.WaitGroup
	conflicts := c.Counted(t, "concurrent DoPhases", func() {
		for k := range keys {
			key := fmt.Sprintf("ride-%02d", k)
			barrier := make(chan struct{})
			for i := range calls {
				wg.Go(func() {
					<-barrier
					results[k][i], _, errs[k][i] = idempotency.DoPhases(ctx, stores[i%len(stores)], "rider", key, nil, nil, phases, finish)
				})
			}
			close(barrier)
		}
		wg.Wait()
	})
	for k := range keys {
		key := fmt.Sprintf("ride-%02d", k)
		want := receipt{key, "ch_" + key}
		ran := 0
		for i := range calls {
			switch err := errs[k][i]; {
			case err == nil:
				ran++
				if results[k][i] != want {
					t.Errorf("%s call %d: receipt %+v, want %+v", key, i, results[k][i], want)
				}
			case !errors.Is(err, idempotency.ErrInProgress):
				t.Errorf("%s call %d: %v, want the receipt or ErrInProgress", key, i, err)
			}
		}
		if ran == 0 {
			t.Errorf("%s: no call returned the receipt", key)
		}
		if got, replayed, err := idempotency.DoPhases(ctx, stores[k%len(stores)], "rider", key, nil, nil, phases, finish); err != nil || !replayed || got != want {
			t.Errorf("%s: a call after the others = %+v, replayed %v, %v; want the replayed receipt", key, got, replayed, err)
		}
	}
	var rides int
	if err := c.Synced.QueryRowContext(ctx, `SELECT COUNT(*) FROM rides WHERE charge <> ''`).Scan(&rides); err != nil || rides != keys {
		t.Errorf("%d charged rides, %v; want %d", rides, err, keys)
	}
	if len(charged) != keys {
		t.Errorf("%d keys charged, want %d", len(charged), keys)
	}
	t.Logf("%d keys × %d calls: %d certification failures and brute-force aborts", keys, calls, conflicts)
}
