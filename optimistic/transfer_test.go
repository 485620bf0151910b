package optimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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

// Money-scenario sizes: 16 concurrent transferrers over 4 accounts, so
// every transfer collides with others on its rows.
const (
	transferWorkers   = 16
	transfersEach     = 10
	transferAccounts  = 4
	openingBalance    = 1000
	transferMaxAmount = 50
)

var errInsufficient = errors.New("insufficient funds")

// accountsTable is the two-column example (key "id", version "version" by
// default).
var accountsTable = optimistic.Table{Name: "accounts"}

// leg is one row of a transfer.
type leg struct{ id, delta int64 }

// legs returns the two rows of a transfer in key order: transfers in
// opposite directions then queue on the first row instead of deadlocking
// (which InTx would retry too, but PostgreSQL detects a deadlock only after
// deadlock_timeout, 1 s by default).
func legs(from, to, amount int64) []leg {
	if from < to {
		return []leg{{from, -amount}, {to, amount}}
	}
	return []leg{{to, amount}, {from, -amount}}
}

// txPolicy retries conflicts, deadlocks and serialization failures for
// long enough that every transfer commits under 16-way contention.
var txPolicy = &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}}

// runTransfers runs the workers, each making transfersEach transfers
// between random distinct accounts through transfer, and returns the
// number of committed transfers.
func runTransfers(t *testing.T, transfer func(ctx context.Context, from, to, amount int64) error) (committed int64) {
	t.Helper()
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		done  atomic.Int64
		errs  = make([]error, transferWorkers)
	)
	for w := range transferWorkers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 8))
			<-start
			for range transfersEach {
				from := r.Int64N(transferAccounts) + 1
				to := (from+r.Int64N(transferAccounts-1))%transferAccounts + 1
				err := transfer(t.Context(), from, to, r.Int64N(transferMaxAmount)+1)
				switch {
				case err == nil:
					done.Add(1)
				case errors.Is(err, errInsufficient):
				default:
					errs[w] = err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return done.Load()
}

// checkBooks asserts that no money was created or destroyed and that each
// committed transfer moved exactly two versions.
func checkBooks(t *testing.T, total, versions, committed, conflicts int64) {
	t.Helper()
	t.Logf("%d transfers committed, %d conflicts retried; total %d, versions moved %d", committed, conflicts, total, versions)
	if total != transferAccounts*openingBalance {
		t.Fatalf("total %d; want %d (money created or destroyed)", total, transferAccounts*openingBalance)
	}
	if versions != 2*committed {
		t.Fatalf("versions moved %d; want 2 per committed transfer (%d)", versions, 2*committed)
	}
}

func countConflicts(ctx context.Context, n *atomic.Int64) context.Context {
	return observe.WithHooks(ctx, &observe.Hooks{Conflict: func(context.Context, observe.ConflictEvent) { n.Add(1) }})
}

// TestTransfersPostgres: the two-row transfer of the package
// documentation — reads and both CAS inside pessimisticpg.InTx, which
// retries ErrConflict — keeps the total exact under contention.
func TestTransfersPostgres(t *testing.T) {
	t.Parallel()
	pool := pgPool(t)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, version bigint NOT NULL DEFAULT 1)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), "INSERT INTO accounts (id, balance) SELECT g, $1 FROM generate_series(1, $2::int) g", openingBalance, transferAccounts); err != nil {
		t.Fatal(err)
	}
	var conflicts atomic.Int64
	committed := runTransfers(t, func(ctx context.Context, from, to, amount int64) error {
		return pessimisticpg.InTx(countConflicts(ctx, &conflicts), pool, txPolicy, func(ctx context.Context, tx pgx.Tx) error {
			for _, l := range legs(from, to, amount) {
				var balance, version int64
				if err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = $1", l.id).Scan(&balance, &version); err != nil {
					return err
				}
				if balance+l.delta < 0 {
					return errInsufficient
				}
				if _, err := optimisticpg.Update(ctx, tx, accountsTable, l.id, version, map[string]any{"balance": balance + l.delta}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	var total, versions int64
	if err := pool.QueryRow(t.Context(), "SELECT sum(balance), sum(version - 1) FROM accounts").Scan(&total, &versions); err != nil {
		t.Fatal(err)
	}
	checkBooks(t, total, versions, committed, conflicts.Load())
}

// TestTransfersMariaDB is TestTransfersPostgres with
// pessimisticmysql.InTx (REPEATABLE READ, the server default).
func TestTransfersMariaDB(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	for id := range int64(transferAccounts) {
		if _, err := db.ExecContext(ctx, "INSERT INTO accounts (id, balance) VALUES (?, ?)", id+1, openingBalance); err != nil {
			t.Fatal(err)
		}
	}
	var conflicts atomic.Int64
	committed := runTransfers(t, func(ctx context.Context, from, to, amount int64) error {
		return pessimisticmysql.InTx(countConflicts(ctx, &conflicts), db, txPolicy, func(ctx context.Context, tx *sql.Tx) error {
			for _, l := range legs(from, to, amount) {
				var balance, version int64
				if err := tx.QueryRowContext(ctx, "SELECT balance, version FROM accounts WHERE id = ?", l.id).Scan(&balance, &version); err != nil {
					return err
				}
				if balance+l.delta < 0 {
					return errInsufficient
				}
				if _, err := optimisticmysql.Update(ctx, tx, accountsTable, l.id, version, map[string]any{"balance": balance + l.delta}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	var total, versions int64
	if err := db.QueryRowContext(ctx, "SELECT CAST(SUM(balance) AS SIGNED), CAST(SUM(version - 1) AS SIGNED) FROM accounts").Scan(&total, &versions); err != nil {
		t.Fatal(err)
	}
	checkBooks(t, total, versions, committed, conflicts.Load())
}
