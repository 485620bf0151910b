package pessimistic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// TestWaitTimeoutOutsideTransaction: LockRows with WaitTimeout on a handle
// that is not a transaction is bad input, reported at once. On PostgreSQL
// the timeout is a transaction-scoped lock_timeout, which outside a
// transaction does nothing: the wait behind a held row was unbounded
// (here: until the caller's 5 s deadline). MariaDB's WAIT n would bound
// it, but the lock would end with its statement; both adapters accept the
// same handles. ClaimJobs on MariaDB is two statements that must share a
// transaction (else two workers can claim one job), so it needs a *sql.Tx.
func TestWaitTimeoutOutsideTransaction(t *testing.T) {
	lock := pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: 200 * time.Millisecond}
	check := func(t *testing.T, start time.Time, err error) {
		t.Helper()
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Fatalf("after %v: err = %v, want ErrInvalidArgument", time.Since(start).Round(time.Millisecond), err)
		}
	}
	t.Run("Postgres", func(t *testing.T) {
		pool := pgPool(t, 4)
		ctx := t.Context()
		if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1)"); err != nil {
			t.Fatal(err)
		}
		holder, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback(context.WithoutCancel(ctx))
		if _, err := pessimisticpg.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = pessimisticpg.LockRows(wctx, pool, "inventory", "id", []int64{1}, lock)
		check(t, start, err)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		_, err = pessimisticpg.LockRows(wctx, conn.Conn(), "inventory", "id", []int64{1}, lock)
		check(t, start, err)
	})
	t.Run("MariaDB", func(t *testing.T) {
		db := myDB(t, 4)
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1); INSERT INTO jobs (payload) VALUES ('p')"); err != nil {
			t.Fatal(err)
		}
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := pessimisticmysql.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = pessimisticmysql.LockRows(wctx, db, "inventory", "id", []int64{1}, lock)
		check(t, start, err)
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, h := range []pessimisticmysql.DBTX{db, conn} {
			jobs, err := pessimisticmysql.ClaimJobs(wctx, h, "jobs", 1, nil)
			if len(jobs) != 0 {
				t.Fatalf("claimed %v outside a transaction", jobs)
			}
			check(t, start, err)
		}
	})
}
