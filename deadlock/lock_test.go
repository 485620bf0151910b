package deadlock_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/concurkit/concurkit/deadlock"
)

const (
	S = deadlock.Shared
	X = deadlock.Exclusive
)

func mustAcquire(t *testing.T, m *deadlock.LockManager, txn deadlock.TxnID, r deadlock.Resource, mode deadlock.Mode, want deadlock.Status) {
	t.Helper()
	got, err := m.Acquire(txn, r, mode)
	if err != nil {
		t.Fatalf("Acquire(T%d, r%d, %s): %v", txn, r, mode, err)
	}
	if got != want {
		t.Fatalf("Acquire(T%d, r%d, %s) = %s, want %s", txn, r, mode, got, want)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTwoTransactionCycle(t *testing.T) {
	var m deadlock.LockManager
	mustAcquire(t, &m, 1, 10, X, deadlock.Granted)
	mustAcquire(t, &m, 2, 20, X, deadlock.Granted)
	mustAcquire(t, &m, 1, 20, X, deadlock.Waiting)
	if c := m.FindCycle(1); c != nil {
		t.Fatalf("cycle before it exists: %v", c)
	}
	mustAcquire(t, &m, 2, 10, X, deadlock.Waiting)
	if got, want := m.FindCycle(2), []deadlock.TxnID{2, 1}; !slices.Equal(got, want) {
		t.Fatalf("FindCycle(2) = %v, want %v", got, want)
	}
	if got, want := m.FindCycle(1), []deadlock.TxnID{1, 2}; !slices.Equal(got, want) {
		t.Fatalf("FindCycle(1) = %v, want %v", got, want)
	}
	// Abort the victim: T1 gets r20.
	got := m.Release(2)
	want := []deadlock.Grant{{Txn: 1, Resource: 20, Mode: X}}
	if !slices.Equal(got, want) {
		t.Fatalf("Release(2) = %v, want %v", got, want)
	}
	if _, _, w := m.Waiting(1); w {
		t.Fatal("T1 still waiting")
	}
	if n := m.Held(1); n != 2 {
		t.Fatalf("T1 holds %d locks, want 2", n)
	}
}

func TestThreeWayCycle(t *testing.T) {
	var m deadlock.LockManager
	for i := deadlock.TxnID(1); i <= 3; i++ {
		mustAcquire(t, &m, i, deadlock.Resource(i), X, deadlock.Granted)
	}
	mustAcquire(t, &m, 1, 2, X, deadlock.Waiting)
	mustAcquire(t, &m, 2, 3, X, deadlock.Waiting)
	if c := m.FindCycle(2); c != nil {
		t.Fatalf("premature cycle %v", c)
	}
	mustAcquire(t, &m, 3, 1, S, deadlock.Waiting)
	if got, want := m.FindCycle(3), []deadlock.TxnID{3, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("FindCycle(3) = %v, want %v", got, want)
	}
}

func TestUpgradeDeadlock(t *testing.T) {
	var m deadlock.LockManager
	mustAcquire(t, &m, 1, 7, S, deadlock.Granted)
	mustAcquire(t, &m, 2, 7, S, deadlock.Granted)
	mustAcquire(t, &m, 1, 7, X, deadlock.Waiting)
	if c := m.FindCycle(1); c != nil {
		t.Fatalf("premature cycle %v", c)
	}
	mustAcquire(t, &m, 2, 7, X, deadlock.Waiting)
	if got, want := m.FindCycle(2), []deadlock.TxnID{2, 1}; !slices.Equal(got, want) {
		t.Fatalf("FindCycle(2) = %v, want %v", got, want)
	}
	if got, want := m.Release(2), []deadlock.Grant{{Txn: 1, Resource: 7, Mode: X}}; !slices.Equal(got, want) {
		t.Fatalf("Release(2) = %v, want %v", got, want)
	}
	if got, want := m.Holders(7), []deadlock.Holder{{Txn: 1, Mode: X}}; !slices.Equal(got, want) {
		t.Fatalf("Holders = %v, want %v", got, want)
	}
}

func TestSoleHolderUpgradesAtOnce(t *testing.T) {
	var m deadlock.LockManager
	mustAcquire(t, &m, 1, 7, S, deadlock.Granted)
	mustAcquire(t, &m, 1, 7, S, deadlock.Granted)
	mustAcquire(t, &m, 1, 7, X, deadlock.Granted)
	mustAcquire(t, &m, 1, 7, S, deadlock.Granted) // X covers S
	if got, want := m.Holders(7), []deadlock.Holder{{Txn: 1, Mode: X}}; !slices.Equal(got, want) {
		t.Fatalf("Holders = %v, want %v", got, want)
	}
}

func TestWaitingWriterBlocksLaterReaders(t *testing.T) {
	var m deadlock.LockManager
	mustAcquire(t, &m, 1, 1, S, deadlock.Granted)
	mustAcquire(t, &m, 2, 1, X, deadlock.Waiting)
	mustAcquire(t, &m, 3, 1, S, deadlock.Waiting) // compatible with T1, but behind T2
	mustAcquire(t, &m, 4, 1, S, deadlock.Waiting)
	if got, want := m.Blockers(3), []deadlock.TxnID{2}; !slices.Equal(got, want) {
		t.Fatalf("Blockers(3) = %v, want %v", got, want)
	}
	if got, want := m.Blockers(2), []deadlock.TxnID{1}; !slices.Equal(got, want) {
		t.Fatalf("Blockers(2) = %v, want %v", got, want)
	}
	if got, want := m.Release(1), []deadlock.Grant{{Txn: 2, Resource: 1, Mode: X}}; !slices.Equal(got, want) {
		t.Fatalf("Release(1) = %v, want %v", got, want)
	}
	// Both readers are granted together when the writer ends.
	want := []deadlock.Grant{{Txn: 3, Resource: 1, Mode: S}, {Txn: 4, Resource: 1, Mode: S}}
	if got := m.Release(2); !slices.Equal(got, want) {
		t.Fatalf("Release(2) = %v, want %v", got, want)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestCancelledWaiterUnblocksReaders(t *testing.T) {
	var m deadlock.LockManager
	mustAcquire(t, &m, 1, 1, S, deadlock.Granted)
	mustAcquire(t, &m, 2, 1, X, deadlock.Waiting)
	mustAcquire(t, &m, 3, 1, S, deadlock.Waiting)
	// Aborting the waiting writer lets the reader behind it in.
	if got, want := m.Release(2), []deadlock.Grant{{Txn: 3, Resource: 1, Mode: S}}; !slices.Equal(got, want) {
		t.Fatalf("Release(2) = %v, want %v", got, want)
	}
}

func TestTryAcquire(t *testing.T) {
	var m deadlock.LockManager
	for _, c := range []struct {
		txn  deadlock.TxnID
		mode deadlock.Mode
		want bool
	}{
		{1, S, true}, {2, S, true}, {3, X, false}, {1, X, false}, {2, S, true},
	} {
		got, err := m.TryAcquire(c.txn, 5, c.mode)
		if err != nil || got != c.want {
			t.Fatalf("TryAcquire(T%d, %s) = %v, %v; want %v", c.txn, c.mode, got, err, c.want)
		}
		if q := m.Queue(5); len(q) != 0 {
			t.Fatalf("TryAcquire queued %v", q)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireErrors(t *testing.T) {
	var m deadlock.LockManager
	if _, err := m.Acquire(1, 1, 0); !errors.Is(err, deadlock.ErrInvalidMode) {
		t.Fatalf("mode 0: %v", err)
	}
	if _, err := m.TryAcquire(1, 1, 9); !errors.Is(err, deadlock.ErrInvalidMode) {
		t.Fatalf("mode 9: %v", err)
	}
	mustAcquire(t, &m, 1, 1, X, deadlock.Granted)
	mustAcquire(t, &m, 2, 1, X, deadlock.Waiting)
	if _, err := m.Acquire(2, 2, X); !errors.Is(err, deadlock.ErrAlreadyWaiting) {
		t.Fatalf("second wait: %v", err)
	}
	if g := m.Release(99); g != nil {
		t.Fatalf("Release(unknown) = %v", g)
	}
}

// TestLockManagerRandom drives the lock manager with random requests,
// breaking every deadlock found by FindCycle on the new wait, and checks
// after every step that no resource is held in incompatible modes and that
// the queues are consistent; at the end every transaction got to finish.
func TestLockManagerRandom(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		var m deadlock.LockManager
		txns, res := 6+int(seed%25), 2+int(seed%9)
		waiting := map[deadlock.TxnID]bool{}
		steps := map[deadlock.TxnID]int{}
		done := 0
		finish := func(id deadlock.TxnID) {
			for _, g := range m.Release(id) {
				if !waiting[g.Txn] {
					t.Fatalf("seed %d: grant to non-waiting T%d", seed, g.Txn)
				}
				delete(waiting, g.Txn)
			}
			delete(waiting, id)
			steps[id] = -1
			done++
		}
		for i := 0; done < txns; i++ {
			if i > 100000 {
				t.Fatalf("seed %d: no progress", seed)
			}
			id := deadlock.TxnID(rng.IntN(txns) + 1)
			if waiting[id] || steps[id] < 0 {
				continue
			}
			if steps[id] == 5 {
				finish(id)
				continue
			}
			steps[id]++
			mode := S
			if rng.IntN(2) == 0 {
				mode = X
			}
			st, err := m.Acquire(id, deadlock.Resource(rng.IntN(res)), mode)
			if err != nil {
				t.Fatal(err)
			}
			if st == deadlock.Waiting {
				crossCheckCycles(t, &m)
				waiting[id] = true
				for c := m.FindCycle(id); c != nil; c = m.FindCycle(id) {
					if c[0] != id {
						t.Fatalf("cycle %v does not start at T%d", c, id)
					}
					finish(slices.Max(c))
					if !waiting[id] {
						break
					}
				}
			}
			if err := m.Check(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			// Detection on every wait leaves no cycle anywhere.
			for w := range waiting {
				if c := m.FindCycle(w); c != nil {
					t.Fatalf("seed %d: undetected cycle %v", seed, c)
				}
			}
			crossCheckCycles(t, &m)
		}
		if g := m.Graph(); len(g.Edges) != 0 {
			t.Fatalf("seed %d: edges left %v", seed, g.Edges)
		}
	}
}

// crossCheckCycles compares FindCycle with a plain search of the full
// wait-for graph (Graph's edges): for every waiting transaction, a cycle
// through it exists exactly when FindCycle reports one, and the reported
// cycle follows real edges.
func crossCheckCycles(t *testing.T, m *deadlock.LockManager) {
	t.Helper()
	adj := map[deadlock.TxnID][]deadlock.TxnID{}
	edge := map[[2]deadlock.TxnID]bool{}
	for _, e := range m.Graph().Edges {
		adj[e.From] = append(adj[e.From], e.To)
		edge[[2]deadlock.TxnID{e.From, e.To}] = true
	}
	for start := range adj {
		seen := map[deadlock.TxnID]bool{}
		stack := slices.Clone(adj[start])
		onCycle := false
		for len(stack) > 0 && !onCycle {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if x == start {
				onCycle = true
			}
			if !seen[x] {
				seen[x] = true
				stack = append(stack, adj[x]...)
			}
		}
		c := m.FindCycle(start)
		if onCycle != (c != nil) {
			t.Fatalf("T%d: full graph has cycle=%v, FindCycle = %v", start, onCycle, c)
		}
		for i := range c {
			if !edge[[2]deadlock.TxnID{c[i], c[(i+1)%len(c)]}] {
				t.Fatalf("FindCycle(%d) = %v uses a missing edge T%d->T%d", start, c, c[i], c[(i+1)%len(c)])
			}
		}
		if len(c) > 0 && c[0] != start {
			t.Fatalf("FindCycle(%d) = %v", start, c)
		}
		if u := slices.Compact(slices.Sorted(slices.Values(c))); len(u) != len(c) {
			t.Fatalf("FindCycle(%d) = %v is not a simple cycle", start, c)
		}
	}
}

// FuzzLockManager interprets the input as a sequence of requests and
// releases and checks the lock table's invariants and FindCycle against a
// plain search of the full wait-for graph after every step.
func FuzzLockManager(f *testing.F) {
	f.Add([]byte{0, 1, 1, 1, 2, 1, 0, 2, 1, 1, 1, 1})
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m deadlock.LockManager
		for i := 0; i+2 < len(data) && i < 3*200; i += 3 {
			txn := deadlock.TxnID(data[i]%8 + 1)
			r := deadlock.Resource(data[i+1] % 5)
			switch data[i+2] % 4 {
			case 0, 1:
				mode := deadlock.Mode(data[i+2]%4 + 1)
				if _, _, w := m.Waiting(txn); w {
					if _, err := m.Acquire(txn, r, mode); !errors.Is(err, deadlock.ErrAlreadyWaiting) {
						t.Fatalf("second wait: %v", err)
					}
					continue
				}
				if _, err := m.Acquire(txn, r, mode); err != nil {
					t.Fatal(err)
				}
			case 2:
				for _, g := range m.Release(txn) {
					if _, _, w := m.Waiting(g.Txn); w {
						t.Fatalf("T%d granted but still waiting", g.Txn)
					}
				}
			case 3:
				if _, _, w := m.Waiting(txn); !w {
					if _, err := m.TryAcquire(txn, r, deadlock.Exclusive); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			crossCheckCycles(t, &m)
		}
	})
}
