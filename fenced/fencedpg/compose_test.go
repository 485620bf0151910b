package fencedpg_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

// errRetry marks a transfer whose compare-and-swap found another version.
var errRetry = errors.New("version moved")

// TestFencedJobWithCASTransfers: the building block of "hold a lease,
// write fenced and versioned". Optimistic two-row transfers (read, then
// CAS both rows in one transaction) run concurrently with a fenced job
// that moves money between the same rows the documented way: FOR UPDATE,
// then fencedpg.Update on a Table with VersionColumn, in one transaction.
// The total stays exact. Without VersionColumn the transfers overwrite the
// job's writes (the 4,100 → 4,107).
func TestFencedJobWithCASTransfers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgPool(t)
	if _, err := db.Exec(ctx, pgAccounts+`; INSERT INTO accounts (id, amount, version) SELECT g, 1000, 1 FROM generate_series(1, 4) g`); err != nil {
		t.Fatal(err)
	}
	table := fenced.Table{Name: "accounts", VersionColumn: "version"}
	retryable := func(err error) bool {
		c := sqlerr.Classify(err)
		return errors.Is(err, errRetry) || c == sqlerr.Deadlock || c == sqlerr.Serialization
	}
	pair := func() (int64, int64) {
		a := rand.Int64N(4) + 1
		return a, (a+rand.Int64N(3))%4 + 1
	}
	transfer := func() error {
		from, to := pair()
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var fb, fv, tb, tv int64
			if err := tx.QueryRow(ctx, "SELECT amount, version FROM accounts WHERE id = $1", from).Scan(&fb, &fv); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT amount, version FROM accounts WHERE id = $1", to).Scan(&tb, &tv); err != nil {
				return err
			}
			writes := []struct{ id, amount, version int64 }{{from, fb - 7, fv}, {to, tb + 7, tv}}
			if from > to { // row locks in id order: no deadlocks (each costs deadlock_timeout, 1 s)
				writes[0], writes[1] = writes[1], writes[0]
			}
			for _, w := range writes {
				tag, err := tx.Exec(ctx, "UPDATE accounts SET amount = $2, version = version + 1 WHERE id = $1 AND version = $3", w.id, w.amount, w.version)
				if err != nil {
					return err
				}
				if tag.RowsAffected() == 0 {
					return errRetry
				}
			}
			return nil
		})
	}
	job := func(tok fenced.Token) error {
		a, b := pair()
		if a > b {
			a, b = b, a // lock in id order
		}
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var ab, bb int64
			if err := tx.QueryRow(ctx, "SELECT amount FROM accounts WHERE id = $1 FOR UPDATE", a).Scan(&ab); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT amount FROM accounts WHERE id = $1 FOR UPDATE", b).Scan(&bb); err != nil {
				return err
			}
			if err := fencedpg.Update(ctx, tx, table, a, tok, map[string]any{"amount": ab - 5}); err != nil {
				return err
			}
			return fencedpg.Update(ctx, tx, table, b, tok, map[string]any{"amount": bb + 5})
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
				// Jittered backoff, so that conflicting writers spread out.
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
	if err := db.QueryRow(ctx, "SELECT sum(amount) FROM accounts").Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 4000 {
		t.Fatalf("total %d after the transfers and the fenced job, want 4000", total)
	}
}
