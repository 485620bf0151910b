package fencedmysql_test

import (
	"database/sql"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

// errRetry marks a transfer whose compare-and-swap found another version.
var errRetry = errors.New("version moved")

// TestFencedJobWithCASTransfers: fencedpg's test of the same name on
// MariaDB (REPEATABLE READ, the server's default): optimistic two-row
// transfers and a fenced job (FOR UPDATE, then fencedmysql.Update on a
// Table with VersionColumn, in one transaction) on the same rows keep the
// total exact.
func TestFencedJobWithCASTransfers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := myDB(t)
	for _, q := range []string{myAccounts, "INSERT INTO accounts (id, amount, version) VALUES (1, 1000, 1), (2, 1000, 1), (3, 1000, 1), (4, 1000, 1)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	table := fenced.Table{Name: "accounts", VersionColumn: "version"}
	retryable := func(err error) bool {
		c := mysqlerr.Classify(err)
		return errors.Is(err, errRetry) || c == sqlerr.Deadlock || c == sqlerr.Serialization
	}
	pair := func() (int64, int64) {
		a := rand.Int64N(4) + 1
		return a, (a+rand.Int64N(3))%4 + 1
	}
	inTx := func(fn func(tx *sql.Tx) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	transfer := func() error {
		from, to := pair()
		return inTx(func(tx *sql.Tx) error {
			var fb, fv, tb, tv int64
			if err := tx.QueryRowContext(ctx, "SELECT amount, version FROM accounts WHERE id = ?", from).Scan(&fb, &fv); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, "SELECT amount, version FROM accounts WHERE id = ?", to).Scan(&tb, &tv); err != nil {
				return err
			}
			writes := []struct{ id, amount, version int64 }{{from, fb - 7, fv}, {to, tb + 7, tv}}
			if from > to { // row locks in id order
				writes[0], writes[1] = writes[1], writes[0]
			}
			for _, w := range writes {
				res, err := tx.ExecContext(ctx, "UPDATE accounts SET amount = ?, version = version + 1 WHERE id = ? AND version = ?", w.amount, w.id, w.version)
				if err != nil {
					return err
				}
				if n, err := res.RowsAffected(); err != nil || n == 0 {
					return errors.Join(errRetry, err)
				}
			}
			return nil
		})
	}
	job := func(tok fenced.Token) error {
		a, b := pair()
		if a > b {
			a, b = b, a
		}
		return inTx(func(tx *sql.Tx) error {
			var ab, bb int64
			if err := tx.QueryRowContext(ctx, "SELECT amount FROM accounts WHERE id = ? FOR UPDATE", a).Scan(&ab); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, "SELECT amount FROM accounts WHERE id = ? FOR UPDATE", b).Scan(&bb); err != nil {
				return err
			}
			if err := fencedmysql.Update(ctx, tx, table, a, tok, map[string]any{"amount": ab - 5}); err != nil {
				return err
			}
			return fencedmysql.Update(ctx, tx, table, b, tok, map[string]any{"amount": bb + 5})
		})
	}
	run := func(n int, op func() error) error {
		for range n {
			for {
				err := op()
				if err == nil {
					break
				}
				if !retryable(err) {
					return err
				}
				time.Sleep(time.Duration(rand.IntN(5000)) * time.Microsecond)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	for range 8 {
		wg.Go(func() { errs <- run(25, transfer) })
	}
	wg.Go(func() { errs <- run(25, func() error { return job(7) }) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	if err := db.QueryRowContext(ctx, "SELECT SUM(amount) FROM accounts").Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 4000 {
		t.Fatalf("total %d after the transfers and the fenced job, want 4000", total)
	}
}
