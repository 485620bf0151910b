package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/pessimistic"
)

// eventually polls cond (an observation of server state, not a sleep used
// for ordering) every interval until it holds, failing after 10 s.
func eventually(t *testing.T, what string, interval time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(interval)
	}
}

// awaitReturn waits for the waiter's result after cancel; the holder still
// holds its lock, so a waiter that waited for the lock would never return.
func awaitReturn(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not return after cancel while the holder kept the lock")
		return nil
	}
}

func checkCanceled(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, pessimistic.ErrLockTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want both ErrLockTimeout and context.Canceled", err)
	}
}

func TestCancelRowLockWaitPostgres(t *testing.T) {
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
	if _, err := pessimistic.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pid := make(chan uint32, 1)
	done := make(chan error, 1)
	go func() {
		done <- pessimistic.InTx(wctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
			pid <- tx.Conn().PgConn().PID()
			_, err := pessimistic.LockRows(ctx, tx, "inventory", "id", []int64{1}, pessimistic.Lock{})
			return err
		})
	}()
	waiter := <-pid
	eventually(t, "the waiter to block on the row lock", 2*time.Millisecond, func() (bool, error) {
		var n int
		err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", waiter).Scan(&n)
		return n == 1, err
	})
	start := time.Now()
	cancel()
	err = awaitReturn(t, done)
	t.Logf("returned %v after cancel: %v", time.Since(start), err)
	checkCanceled(t, err)
}

func TestCancelAdvisoryLockWaitPostgres(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	key := pessimistic.AdvisoryKey(t.Name())
	l, err := pessimistic.AdvisoryLock(ctx, holder.Conn(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	waiter := c.Conn().PgConn().PID()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := pessimistic.AdvisoryLock(wctx, c.Conn(), key)
		done <- err
	}()
	eventually(t, "the waiter to block on the advisory lock", 2*time.Millisecond, func() (bool, error) {
		var n int
		err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'", waiter).Scan(&n)
		return n == 1, err
	})
	start := time.Now()
	cancel()
	err = awaitReturn(t, done)
	t.Logf("returned %v after cancel: %v", time.Since(start), err)
	checkCanceled(t, err)
}

func TestCancelRowLockWaitMariaDB(t *testing.T) {
	db := myDB(t, 4)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := pessimistic.LockRowsMySQL(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	id := make(chan int64, 1)
	done := make(chan error, 1)
	go func() {
		done <- pessimistic.InTxMySQL(wctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
			var n int64
			if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&n); err != nil {
				return err
			}
			id <- n
			_, err := pessimistic.LockRowsMySQL(ctx, tx, "inventory", "id", []int64{1}, pessimistic.Lock{})
			return err
		})
	}()
	waiter := <-id
	// The driver drops the connection on cancel; the server thread would
	// wait on until the holder ends, so end it.
	t.Cleanup(func() { _, _ = db.Exec(fmt.Sprintf("KILL %d", waiter)) })
	// InnoDB refreshes information_schema.innodb_trx only after 100 ms
	// without readers, so poll more slowly than that.
	eventually(t, "the waiter to block on the row lock", 150*time.Millisecond, func() (bool, error) {
		var n int
		err := holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", waiter).Scan(&n)
		return n == 1, err
	})
	start := time.Now()
	cancel()
	err = awaitReturn(t, done)
	t.Logf("returned %v after cancel: %v", time.Since(start), err)
	checkCanceled(t, err)
}
