package sagamysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/internal/galeratest"
	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/internal/sagatest"
	"github.com/concurkit/concurkit/testkit"
)

// The Galera tests run the saga suite on testkit's three-node cluster:
// every store the suite asks for is a pool over the three nodes (no idle
// connection, so consecutive statements run on different nodes), each
// starting on another node, so that the runners of ConcurrentRunners and
// ConcurrentResume claim on different nodes at once. There a lease taken
// on one node does not lock out a claim on another; of concurrent claims
// the first certified wins and the others fail (1213, retried by the
// server once for an autocommit statement), and a node may not yet have
// applied a claim or record made on another. The suite's checks read
// through the synced pool.

// galeraHarness is harnessFor on a fresh database of the cluster.
func galeraHarness(t *testing.T) (*galeratest.Cluster, *sagatest.Harness) {
	c := galeratest.New(t)
	for _, ddl := range []string{sagaDDL(t), sagatest.EffectsDDLMySQL} {
		if _, err := c.Synced.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	c.Sync(t)
	synced := newStore(t, c.Synced)
	var next atomic.Int64
	spread := func(t *testing.T) *sql.DB {
		i := int(next.Add(1)) % len(c.DSNs)
		db := testkit.GaleraFor(t, append(slices.Clone(c.DSNs[i:]), c.DSNs[:i]...))
		db.SetMaxIdleConns(0)
		return db
	}
	return c, &sagatest.Harness{
		Store: func(t *testing.T) saga.Store { return newStore(t, spread(t)) },
		Crashable: func(t *testing.T) (saga.Store, func()) {
			node := c.Nodes[int(next.Add(1))%len(c.Nodes)]
			conn, err := node.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			var id int64
			if err := conn.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			return newStore(t, conn), func() { kill(t, node, id) }
		},
		Effect: func(ctx context.Context, key string) error {
			_, err := c.Synced.ExecContext(ctx, "INSERT INTO saga_effects (effect_key) VALUES (?) ON DUPLICATE KEY UPDATE applied = applied + 1", key)
			return err
		},
		Effects: func(ctx context.Context) ([]string, error) {
			rows, err := c.Synced.QueryContext(ctx, "SELECT effect_key FROM saga_effects")
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var keys []string
			for rows.Next() {
				var k string
				if err := rows.Scan(&k); err != nil {
					return nil, err
				}
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return keys, rows.Err()
		},
		Load:       synced.Load,
		Unfinished: synced.Unfinished,
	}
}

// TestGaleraSuite runs the saga suite on the cluster, but for
// StepEndsWithLeaseWhileExtendBlocked, which holds a row lock to block the
// runner's extension: on Galera a lock taken on one node blocks nothing
// on another. ConcurrentRunners and ConcurrentResume race eight runners'
// claims across the nodes once (whether two claims overlap before either
// is applied on the other's node is up to timing); ClaimIsExclusive does
// so in rounds, and must make the cluster count conflicts.
func TestGaleraSuite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fn    func(*testing.T, *sagatest.Harness)
		races bool
	}{
		{"CompletesAndReplays", sagatest.CompletesAndReplays, false},
		{"FailureCompensatesInReverseOnce", sagatest.FailureCompensatesInReverseOnce, false},
		{"CompensationResumedAfterKill", sagatest.CompensationResumedAfterKill, false},
		{"CompensationResumedAfterCancel", sagatest.CompensationResumedAfterCancel, false},
		{"CompensationKeepsFailing", sagatest.CompensationKeepsFailing, false},
		{"CrashBetweenActionAndRecord", sagatest.CrashBetweenActionAndRecord, false},
		{"CancelBetweenActionAndRecord", sagatest.CancelBetweenActionAndRecord, false},
		{"ConcurrentRunners", sagatest.ConcurrentRunners, false},
		{"ConcurrentResume", sagatest.ConcurrentResume, false},
		{"ClaimIsExclusive", sagatest.ClaimIsExclusive, true},
		{"LeaseTakeoverFencesOldRunner", sagatest.LeaseTakeoverFencesOldRunner, false},
		{"RetryableErrorRetriesStep", sagatest.RetryableErrorRetriesStep, false},
		{"DefinitionAndInputMismatch", sagatest.DefinitionAndInputMismatch, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, h := galeraHarness(t)
			start := time.Now()
			n := c.Counted(t, tc.name, func() { tc.fn(t, h) })
			t.Logf("%s in %v", tc.name, time.Since(start).Round(time.Millisecond))
			if tc.races && n == 0 {
				t.Error("no certification failure or abort: the claims did not race across nodes")
			}
		})
	}
}

// TestGaleraManyRunners: 12 sagas of three steps, the second failing for
// every third saga, each run by six runners at once, two per node, each
// retrying while it gets ErrInProgress. No step's action or compensation
// ever runs in two runners at the same time (each records how many run
// for its saga at once), each action runs once and each compensation of
// a failed saga once, and every saga ends Completed or Compensated, with
// every runner given that one outcome.
func TestGaleraManyRunners(t *testing.T) {
	t.Parallel()
	c := galeratest.New(t)
	if _, err := c.Synced.ExecContext(t.Context(), sagaDDL(t)); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	ctx := t.Context()
	const sagas, runners = 12, 6
	errBoom := errors.New("boom")
	var (
		mu      sync.Mutex
		running = map[string]int{} // per saga, actions and compensations running now
		overlap []string
		calls   = map[string]int{} // "<key> do s1", "<key> undo s1"
	)
	step := func(name string, fail func(key string) bool) saga.Step[string] {
		enter := func(key, what string) func() {
			mu.Lock()
			running[key]++
			calls[key+" "+what+" "+name]++
			if running[key] > 1 {
				overlap = append(overlap, key+" "+what+" "+name)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond) // a step that takes a moment, so that overlaps would show
			return func() { mu.Lock(); running[key]--; mu.Unlock() }
		}
		return saga.NewStep(name, func(ctx context.Context, call *saga.Call[string]) (string, error) {
			defer enter(call.Input, "do")()
			if fail(call.Input) {
				return "", errBoom
			}
			return call.Key, nil
		}, func(ctx context.Context, call *saga.Call[string], _ string) error {
			defer enter(call.Input, "undo")()
			return nil
		})
	}
	fails := func(key string) bool {
		var i int
		_, _ = fmt.Sscanf(key, "saga-%d", &i)
		return i%3 == 0
	}
	def, err := saga.New("galera", 1, &saga.Config{LeaseTTL: time.Minute},
		step("s1", func(string) bool { return false }),
		step("s2", fails),
		step("s3", func(string) bool { return false }),
	)
	if err != nil {
		t.Fatal(err)
	}
	stores := make([]saga.Store, len(c.Nodes))
	for i, n := range c.Nodes {
		stores[i] = newStore(t, n)
	}
	type outcome struct {
		completed bool
		err       error
	}
	results := make([][runners]outcome, sagas)
	finished := make([]chan struct{}, sagas)
	closeOnce := make([]sync.Once, sagas)
	var wg sync.WaitGroup
	start := time.Now()
	conflicts := c.Counted(t, "12 sagas × 6 runners", func() {
		for k := range sagas {
			key := fmt.Sprintf("saga-%02d", k)
			barrier := make(chan struct{})
			finished[k] = make(chan struct{})
			for r := range runners {
				wg.Go(func() {
					<-barrier
					for {
						res, err := def.Run(ctx, stores[r%len(stores)], key, key)
						if errors.Is(err, saga.ErrInProgress) {
							// Turned away while another runs: ask again
							// once a runner of the saga returned.
							<-finished[k]
							continue
						}
						results[k][r] = outcome{err == nil && res != nil, err}
						closeOnce[k].Do(func() { close(finished[k]) })
						return
					}
				})
			}
			close(barrier)
		}
		wg.Wait()
	})
	if len(overlap) > 0 {
		t.Errorf("steps ran in two runners at once: %v", overlap)
	}
	for k := range sagas {
		key := fmt.Sprintf("saga-%02d", k)
		failed := fails(key)
		want := map[string]int{key + " do s1": 1, key + " do s2": 1}
		if failed {
			want[key+" undo s1"] = 1
		} else {
			want[key+" do s3"] = 1
		}
		for _, what := range []string{"do s1", "do s2", "do s3", "undo s1", "undo s2", "undo s3"} {
			if got := calls[key+" "+what]; got != want[key+" "+what] {
				t.Errorf("%s: %s ran %d times, want %d", key, what, got, want[key+" "+what])
			}
		}
		for r, o := range results[k] {
			if failed && (o.completed || !errors.Is(o.err, saga.ErrCompensated)) || !failed && (!o.completed || o.err != nil) {
				t.Errorf("%s runner %d: completed %v, %v; want the saga's one outcome (compensated: %v)", key, r, o.completed, o.err, failed)
			}
		}
		rec, err := newStore(t, c.Synced).Load(ctx, key)
		wantStatus := map[bool]saga.Status{false: saga.Completed, true: saga.Compensated}[failed]
		if err != nil || rec.Status != wantStatus {
			t.Errorf("%s: stored %v, %v; want %s", key, rec, err, wantStatus)
		}
	}
	t.Logf("%d sagas × %d runners on %d nodes in %v, %d conflicts", sagas, runners, len(c.Nodes), time.Since(start).Round(time.Millisecond), conflicts)
}
