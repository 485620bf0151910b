package concurkit_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/testkit"
)

// The pieces compose: money moved by optimistic two-row transfers (each a
// transaction of two compare-and-swap writes, retried as one unit) and by a
// fenced job holding a distributed lease on the same rows stays exact. This
// is the scenario where the pieces used to lose money (a multi-row CAS
// without a transaction) or create it (a fenced write that did not bump the
// version, so concurrent CAS writers overwrote it unseen).

const (
	composeAccounts  = 4
	composeBalance   = 1000
	composeTransfers = 16 // concurrent transfer workers
	composeEach      = 10 // transfers per worker
	composeJobs      = 10 // fenced job runs
)

// accounts is the table both kinds of writers share. Without VersionColumn
// on the fenced side (the negative control, run by hand) both tests fail:
// total 4015, want 4000 — the CAS transfers overwrite the job's writes
// without noticing them.
var (
	casAccounts    = optimistic.Table{Name: "accounts"} // KeyColumn "id", VersionColumn "version"
	fencedAccounts = fenced.Table{Name: "accounts", VersionColumn: "version"}
)

// transferOpts gives the transfers a retry budget for this test's
// contention (16 writers on 4 rows): every transfer must commit, so the
// sum of versions is exact.
var transferOpts = &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1000, MaxElapsed: time.Minute}}

// write is one row of a transfer.
type write struct{ id, version, balance int64 }

// keyOrder returns the two writes of a transfer in key order: the
// compare-and-swap UPDATEs take row locks, and two transfers writing the
// same pair in opposite orders would deadlock.
func keyOrder(a, av, ab, b, bv, bb int64) []write {
	if a > b {
		return []write{{b, bv, bb}, {a, av, ab}}
	}
	return []write{{a, av, ab}, {b, bv, bb}}
}

// pair returns two distinct account ids in ascending order (row locks in
// key order: no deadlocks).
func pair() (int64, int64) {
	a := rand.Int64N(composeAccounts) + 1
	b := (a+rand.Int64N(composeAccounts-1))%composeAccounts + 1
	return min(a, b), max(a, b)
}

func TestComposePostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pool := testkit.Postgres(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL,
		version bigint NOT NULL DEFAULT 1, max_seen_token bigint NOT NULL DEFAULT 0);
		INSERT INTO accounts (id, balance) SELECT g, `+fmt.Sprint(composeBalance)+` FROM generate_series(1, `+fmt.Sprint(composeAccounts)+`) g`); err != nil {
		t.Fatal(err)
	}
	locker, err := pglock.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}

	transfer := func(from, to, amount int64) error {
		return pessimisticpg.InTx(ctx, pool, transferOpts, func(ctx context.Context, tx pgx.Tx) error {
			var fb, fv, tb, tv int64
			if err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = $1", from).Scan(&fb, &fv); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = $1", to).Scan(&tb, &tv); err != nil {
				return err
			}
			for _, w := range keyOrder(from, fv, fb-amount, to, tv, tb+amount) {
				if _, err := optimisticpg.Update(ctx, tx, casAccounts, w.id, w.version, map[string]any{"balance": w.balance}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	job := func() error {
		a, b := pair()
		return distlock.Do(ctx, locker, "interest", nil, func(ctx context.Context, lease distlock.Lease) error {
			return pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
				var ab, bb int64
				if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE", a).Scan(&ab); err != nil {
					return err
				}
				if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE", b).Scan(&bb); err != nil {
					return err
				}
				if err := fencedpg.Update(ctx, tx, fencedAccounts, a, lease.Token(), map[string]any{"balance": ab - 5}); err != nil {
					return err
				}
				return fencedpg.Update(ctx, tx, fencedAccounts, b, lease.Token(), map[string]any{"balance": bb + 5})
			})
		})
	}
	runCompose(t, transfer, job)

	var total, versions int64
	if err := pool.QueryRow(ctx, "SELECT sum(balance), sum(version) FROM accounts").Scan(&total, &versions); err != nil {
		t.Fatal(err)
	}
	checkCompose(t, total, versions)
}

func TestComposeMariaDB(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	db := testkit.MySQL(t)
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL,
		version bigint NOT NULL DEFAULT 1, max_seen_token bigint NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= composeAccounts; id++ {
		if _, err := db.ExecContext(ctx, "INSERT INTO accounts (id, balance) VALUES (?, ?)", id, composeBalance); err != nil {
			t.Fatal(err)
		}
	}
	if err := fencedmysql.CreateSequence(ctx, db); err != nil {
		t.Fatal(err)
	}
	tokens, err := fencedmysql.NewSequence(db)
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	locker, err := redislock.New(rdb, &redislock.Config{Source: tokens})
	if err != nil {
		t.Fatal(err)
	}

	transfer := func(from, to, amount int64) error {
		return pessimisticmysql.InTx(ctx, db, transferOpts, func(ctx context.Context, tx *sql.Tx) error {
			var fb, fv, tb, tv int64
			// REPEATABLE READ (MariaDB's default): these reads come from the
			// transaction's snapshot; the compare-and-swap sees the newest
			// row, so a stale read ends in ErrConflict and InTx retries.
			if err := tx.QueryRowContext(ctx, "SELECT balance, version FROM accounts WHERE id = ?", from).Scan(&fb, &fv); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, "SELECT balance, version FROM accounts WHERE id = ?", to).Scan(&tb, &tv); err != nil {
				return err
			}
			for _, w := range keyOrder(from, fv, fb-amount, to, tv, tb+amount) {
				if _, err := optimisticmysql.Update(ctx, tx, casAccounts, w.id, w.version, map[string]any{"balance": w.balance}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	job := func() error {
		a, b := pair()
		return distlock.Do(ctx, locker, prefix+"interest", nil, func(ctx context.Context, lease distlock.Lease) error {
			return pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
				var ab, bb int64
				if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ? FOR UPDATE", a).Scan(&ab); err != nil {
					return err
				}
				if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ? FOR UPDATE", b).Scan(&bb); err != nil {
					return err
				}
				if err := fencedmysql.Update(ctx, tx, fencedAccounts, a, lease.Token(), map[string]any{"balance": ab - 5}); err != nil {
					return err
				}
				return fencedmysql.Update(ctx, tx, fencedAccounts, b, lease.Token(), map[string]any{"balance": bb + 5})
			})
		})
	}
	runCompose(t, transfer, job)

	var total, versions int64
	if err := db.QueryRowContext(ctx, "SELECT SUM(balance), SUM(version) FROM accounts").Scan(&total, &versions); err != nil {
		t.Fatal(err)
	}
	checkCompose(t, total, versions)
}

// runCompose starts the transfer workers and the job together (a barrier)
// and fails the test on any error: every transfer and every job run must
// commit.
func runCompose(t *testing.T, transfer func(from, to, amount int64) error, job func() error) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, composeTransfers*composeEach+composeJobs)
	for range composeTransfers {
		wg.Go(func() {
			<-start
			for range composeEach {
				a, b := pair()
				if rand.N(2) == 0 {
					a, b = b, a // money flows both ways
				}
				if err := transfer(a, b, rand.Int64N(50)+1); err != nil {
					errs <- fmt.Errorf("transfer: %w", err)
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		for range composeJobs {
			if err := job(); err != nil {
				errs <- fmt.Errorf("fenced job: %w", err)
			}
		}
	})
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// checkCompose: the total is exact, and every committed write bumped a
// version (two per transfer, two per job run), so no write went unseen.
func checkCompose(t *testing.T, total, versions int64) {
	t.Helper()
	if want := int64(composeAccounts * composeBalance); total != want {
		t.Errorf("total balance %d, want %d: money was created or destroyed", total, want)
	}
	if want := int64(composeAccounts + 2*(composeTransfers*composeEach+composeJobs)); versions != want {
		t.Errorf("sum of versions %d, want %d (initial %d + 2 per transfer and per job run)", versions, want, composeAccounts)
	}
}
