package hotrowmysql_test

import (
	"testing"

	"github.com/concurkit/concurkit/hotrow/hotrowmysql"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
)

// TestTransfersExact: the shared suite's 4,000 concurrent transfers between
// 8 hot accounts through two Ledgers (two lockers that must not deadlock),
// under both sql_modes.
func TestTransfersExact(t *testing.T) {
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			db := database(t, mode, hotrowtest.AccountRows())
			st, err := hotrowmysql.NewLedgerStore[int64](db, stock)
			if err != nil {
				t.Fatal(err)
			}
			hotrowtest.TransfersExact(t, st, func(t *testing.T) map[int64]int64 {
				got := map[int64]int64{}
				for a := range hotrowtest.AccountRows() {
					got[a] = value(t, db, a)
				}
				return got
			})
		})
	}
}

// TestLedgerTextKeys: the shared suite's transfers between text keys, in a
// binary collation ("Carol" and "carol" differ).
func TestLedgerTextKeys(t *testing.T) {
	db := database(t, "", nil)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (name VARCHAR(20) COLLATE utf8mb4_bin PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO accounts VALUES ('alice', 100), ('bob', 0), ('Carol', 5)`); err != nil {
		t.Fatal(err)
	}
	st, err := hotrowmysql.NewLedgerStore[string](db, hotrowtest.AccountsTable)
	if err != nil {
		t.Fatal(err)
	}
	hotrowtest.TextKeys(t, st, func(t *testing.T) int64 {
		var sum int64
		if err := db.QueryRowContext(t.Context(), `SELECT SUM(balance) FROM accounts`).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		return sum
	})
}
