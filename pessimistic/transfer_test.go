package pessimistic_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// The money scenario: 16 concurrent transfers between 4 accounts,
// each a read and two optimistic compare-and-swap writes. Without a
// transaction a conflict on the second write leaves the first applied
// (4,000 → 846 in the issue); inside InTx both writes commit together or
// the whole transfer runs again, so the total stays exact.
const (
	transferWorkers = 16
	transfersEach   = 10
	accountsN       = 4    // the INSERTs below create accounts 1..4
	startBalance    = 1000 // with this balance each
)

var (
	transferTable  = optimistic.Table{Name: "accounts"}
	transferPolicy = &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}}
)

// pair returns two distinct accounts and an amount.
func pair(r *rand.Rand) (from, to, amount int64) {
	from = r.Int64N(accountsN) + 1
	to = (from+r.Int64N(accountsN-1))%accountsN + 1
	return from, to, r.Int64N(50) + 1
}

// retryCounts returns ctx with observe hooks counting retries by
// observe.ErrorType, and a function that formats the counts.
func retryCounts(ctx context.Context) (context.Context, func() string) {
	var mu sync.Mutex
	n := map[string]int{}
	ctx = observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		mu.Lock()
		defer mu.Unlock()
		n[observe.ErrorType(e.Err)]++
	}})
	return ctx, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprint(n)
	}
}

func TestOptimisticTransfers(t *testing.T) {
	t.Run("Postgres", func(t *testing.T) {
		pool := pgPool(t, transferWorkers+2)
		ctx, retries := retryCounts(t.Context())
		for _, q := range []string{
			"CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, version bigint NOT NULL DEFAULT 1)",
			"INSERT INTO accounts (id, balance) SELECT g, 1000 FROM generate_series(1, 4) g",
		} {
			if _, err := pool.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		read := func(ctx context.Context, tx pgx.Tx, id int64) (b, v int64, err error) {
			err = tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = $1", id).Scan(&b, &v)
			return b, v, err
		}
		var wg sync.WaitGroup
		errs := make([]error, transferWorkers)
		for w := range transferWorkers {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			wg.Go(func() {
				for range transfersEach {
					from, to, amount := pair(r)
					err := pessimisticpg.InTx(ctx, pool, transferPolicy, func(ctx context.Context, tx pgx.Tx) error {
						// Transfers write two rows in any order, so they deadlock
						// (and are retried); detect it in 20 ms, not the default 1 s.
						if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '20ms'"); err != nil {
							return err
						}
						fb, fv, err := read(ctx, tx, from)
						if err != nil {
							return err
						}
						tb, tv, err := read(ctx, tx, to)
						if err != nil {
							return err
						}
						if _, err := optimisticpg.Update(ctx, tx, transferTable, from, fv, map[string]any{"balance": fb - amount}); err != nil {
							return err
						}
						_, err = optimisticpg.Update(ctx, tx, transferTable, to, tv, map[string]any{"balance": tb + amount})
						return err
					})
					if err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Errorf("worker %d: %v", w, err)
			}
		}
		var total, versions int64
		if err := pool.QueryRow(ctx, "SELECT sum(balance), sum(version) FROM accounts").Scan(&total, &versions); err != nil {
			t.Fatal(err)
		}
		t.Logf("total %d, %d versions written, retries %s", total, versions-accountsN, retries())
		if total != accountsN*startBalance || versions-accountsN != 2*transferWorkers*transfersEach {
			t.Fatalf("total %d, %d writes; want %d and %d", total, versions-accountsN, accountsN*startBalance, 2*transferWorkers*transfersEach)
		}
	})
	t.Run("MariaDB", func(t *testing.T) {
		db := myDB(t, transferWorkers+2)
		ctx, retries := retryCounts(t.Context())
		for _, q := range []string{
			"CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB",
			"INSERT INTO accounts (id, balance) SELECT seq, 1000 FROM seq_1_to_4",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		read := func(ctx context.Context, tx *sql.Tx, id int64) (b, v int64, err error) {
			err = tx.QueryRowContext(ctx, "SELECT balance, version FROM accounts WHERE id = ?", id).Scan(&b, &v)
			return b, v, err
		}
		var wg sync.WaitGroup
		errs := make([]error, transferWorkers)
		for w := range transferWorkers {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			wg.Go(func() {
				for range transfersEach {
					from, to, amount := pair(r)
					err := pessimisticmysql.InTx(ctx, db, transferPolicy, func(ctx context.Context, tx *sql.Tx) error {
						fb, fv, err := read(ctx, tx, from)
						if err != nil {
							return err
						}
						tb, tv, err := read(ctx, tx, to)
						if err != nil {
							return err
						}
						if _, err := optimisticmysql.Update(ctx, tx, transferTable, from, fv, map[string]any{"balance": fb - amount}); err != nil {
							return err
						}
						_, err = optimisticmysql.Update(ctx, tx, transferTable, to, tv, map[string]any{"balance": tb + amount})
						return err
					})
					if err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Errorf("worker %d: %v", w, err)
			}
		}
		var total, versions int64
		if err := db.QueryRowContext(ctx, "SELECT SUM(balance), SUM(version) FROM accounts").Scan(&total, &versions); err != nil {
			t.Fatal(err)
		}
		t.Logf("total %d, %d versions written, retries %s", total, versions-accountsN, retries())
		if total != accountsN*startBalance || versions-accountsN != 2*transferWorkers*transfersEach {
			t.Fatalf("total %d, %d writes; want %d and %d", total, versions-accountsN, accountsN*startBalance, 2*transferWorkers*transfersEach)
		}
	})
}
