package hotrowtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/concurkit/concurkit/hotrow"
)

// Sizes of TransfersExact.
const (
	Accounts  = 8
	Balance   = 1000
	Transfers = 4000
	MaxAmount = 400
)

// AccountRows are TransfersExact's accounts 1…Accounts, each holding
// Balance.
func AccountRows() map[int64]int64 {
	rows := map[int64]int64{}
	for a := int64(1); a <= Accounts; a++ {
		rows[a] = Balance
	}
	return rows
}

// countingLedger counts the batches a Ledger sends.
type countingLedger struct {
	hotrow.LedgerStore[int64]
	batches atomic.Int64
}

func (s *countingLedger) Apply(ctx context.Context, keys []int64, plan func([]int64, []bool)) error {
	s.batches.Add(1)
	return s.LedgerStore.Apply(ctx, keys, plan)
}

// TransfersExact: Transfers concurrent transfers (Workers goroutines, split
// between two Ledgers on store, as two processes would be) of 1…MaxAmount
// between random accounts 1…Accounts, each holding Balance, and to account
// Accounts+1, which has no row. Checks: every transfer is applied or
// refused (ErrInsufficient, ErrNotFound for the missing account) — no
// deadlock, no other error; no acknowledged balance is negative; the final
// balances equal Balance plus the acknowledged transfers' net, account by
// account (nothing lost, nothing applied twice, money conserved); the
// Ledgers batch. balances reads accounts 1…Accounts.
func TransfersExact(t *testing.T, store hotrow.LedgerStore[int64], balances func(t *testing.T) map[int64]int64) {
	t.Helper()
	cs := &countingLedger{LedgerStore: store}
	var ledgers [2]*hotrow.Ledger[int64]
	for i := range ledgers {
		l, err := hotrow.NewLedger[int64](cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close(context.Background())
		ledgers[i] = l
	}
	var mu sync.Mutex
	net := map[int64]int64{}
	var next, refused, missing atomic.Int64
	var wg sync.WaitGroup
	for w := range Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			l := ledgers[w%2]
			for next.Add(1) <= Transfers {
				from := 1 + rng.Int64N(Accounts)
				to := 1 + rng.Int64N(Accounts+1) // Accounts+1 has no row
				if to == from {
					to = from%Accounts + 1
				}
				tr := hotrow.Transfer[int64]{From: from, To: to, Amount: 1 + rng.Int64N(MaxAmount)}
				b, err := l.Transfer(t.Context(), tr)
				switch {
				case err == nil:
					if b.From < 0 || b.To < 0 {
						t.Errorf("%+v acknowledged with balances %+v", tr, b)
					}
					mu.Lock()
					net[tr.From] -= tr.Amount
					net[tr.To] += tr.Amount
					mu.Unlock()
				case errors.Is(err, hotrow.ErrInsufficient):
					refused.Add(1)
				case errors.Is(err, hotrow.ErrNotFound) && to == Accounts+1:
					missing.Add(1)
				default:
					t.Errorf("%+v: %v", tr, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := balances(t)
	var sum int64
	for a := int64(1); a <= Accounts; a++ {
		sum += got[a]
		if want := Balance + net[a]; got[a] != want {
			t.Errorf("account %d holds %d, want %d (initial %d + acknowledged net %d)", a, got[a], want, Balance, net[a])
		}
		if got[a] < 0 {
			t.Errorf("account %d overdrawn: %d", a, got[a])
		}
	}
	if sum != Accounts*Balance {
		t.Errorf("money not conserved: %d in all, want %d", sum, Accounts*Balance)
	}
	b := cs.batches.Load()
	t.Logf("%d transfers in %d batches: %d refused (insufficient), %d to the missing account", Transfers, b, refused.Load(), missing.Load())
	if refused.Load() == 0 || missing.Load() == 0 {
		t.Errorf("refused %d, missing %d: the workload did not reach the checks", refused.Load(), missing.Load())
	}
	if b > Transfers/2 {
		t.Errorf("%d batches for %d transfers from %d goroutines: not batching", b, Transfers, Workers)
	}
}

// AccountsTable is the string-keyed table TextKeys wants: name → balance,
// alice 100, bob 0, Carol 5 (names compared case-sensitively).
var AccountsTable = hotrow.Table{Name: "accounts", KeyColumn: "name", ValueColumn: "balance"}

// TextKeys: a Ledger on string keys and columns of other names answers a
// sequence of transfers in order, each with both balances after it or its
// refusal ("carol" is not "Carol"); sum reads the table's total after.
func TextKeys(t *testing.T, store hotrow.LedgerStore[string], sum func(t *testing.T) int64) {
	t.Helper()
	ctx := t.Context()
	l, err := hotrow.NewLedger[string](store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	for _, tc := range []struct {
		tr   hotrow.Transfer[string]
		want hotrow.Balances
		err  error
	}{
		{hotrow.Transfer[string]{From: "alice", To: "bob", Amount: 60}, hotrow.Balances{From: 40, To: 60}, nil},
		{hotrow.Transfer[string]{From: "alice", To: "Carol", Amount: 41}, hotrow.Balances{}, hotrow.ErrInsufficient},
		{hotrow.Transfer[string]{From: "bob", To: "Carol", Amount: 60}, hotrow.Balances{From: 0, To: 65}, nil},
		{hotrow.Transfer[string]{From: "Carol", To: "carol", Amount: 1}, hotrow.Balances{}, hotrow.ErrNotFound},
	} {
		got, err := l.Transfer(ctx, tc.tr)
		if got != tc.want || (tc.err == nil) != (err == nil) || tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%+v: %+v, %v; want %+v, %v", tc.tr, got, err, tc.want, tc.err)
		}
	}
	if s := sum(t); s != 105 {
		t.Errorf("total %d after the transfers, want 105", s)
	}
}
