package hotrowpg_test

import (
	"testing"

	"github.com/concurkit/concurkit/hotrow/hotrowpg"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
)

// TestTransfersExact: the shared suite's 4,000 concurrent transfers between
// 8 hot accounts through two Ledgers (two lockers that must not deadlock),
// on the default pool.
func TestTransfersExact(t *testing.T) {
	p := pool(t, hotrowtest.AccountRows())
	st, err := hotrowpg.NewLedgerStore[int64](p, stock)
	if err != nil {
		t.Fatal(err)
	}
	hotrowtest.TransfersExact(t, st, func(t *testing.T) map[int64]int64 {
		got := map[int64]int64{}
		for a := range hotrowtest.AccountRows() {
			got[a] = value(t, p, a)
		}
		return got
	})
}

// TestLedgerTextKeys: the shared suite's transfers between text keys.
func TestLedgerTextKeys(t *testing.T) {
	p := pool(t, nil)
	if _, err := p.Exec(t.Context(), `CREATE TABLE accounts (name text PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO accounts VALUES ('alice', 100), ('bob', 0), ('Carol', 5)`); err != nil {
		t.Fatal(err)
	}
	st, err := hotrowpg.NewLedgerStore[string](p, hotrowtest.AccountsTable)
	if err != nil {
		t.Fatal(err)
	}
	hotrowtest.TextKeys(t, st, func(t *testing.T) int64 {
		var sum int64
		if err := p.QueryRow(t.Context(), `SELECT sum(balance) FROM accounts`).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		return sum
	})
}
