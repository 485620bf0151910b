package optimisticmysql_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
)

// waitFor polls cond (a query of the server's own lock-wait view) until it
// reports true: the server, not a sleep, tells us the CAS is blocked.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
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
		// InnoDB rebuilds its INNODB_TRX cache only when the last read is
		// over 100 ms old: polling faster can keep a stale snapshot (no
		// LOCK WAIT) forever. 150 ms lets it refresh between polls.
		time.Sleep(150 * time.Millisecond)
	}
}

// promptBound is how long a cancelled CAS may take to return. The lock is
// held indefinitely (and lock_timeout / innodb_lock_wait_timeout are far
// larger), so returning at all before the holder lets go shows cancellation
// worked; the bound only keeps a broken build from hanging.
const promptBound = 5 * time.Second

type blockedCAS struct {
	err     error
	elapsed time.Duration
}

// cancelBlocked starts update on its own goroutine, waits until blocked()
// says it waits for a lock, cancels its context and returns what it
// returned and how long that took after the cancel.
func cancelBlocked(t *testing.T, update func(ctx context.Context) error, blocked func() (bool, error)) blockedCAS {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- update(ctx) }()
	waitFor(t, "the CAS to wait on the row lock", blocked)
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		return blockedCAS{err, time.Since(cancelled)}
	case <-time.After(promptBound):
		t.Fatalf("CAS still blocked %v after cancel", promptBound)
		return blockedCAS{}
	}
}

func TestCancelWhileLockedMariaDB(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'sku-1', 5)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "SELECT 1 FROM inventory WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waiter, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	var id int64
	if err := waiter.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	tbl := optimistic.Table{Name: "inventory", KeyColumn: "id", VersionColumn: "version"}
	res := cancelBlocked(t,
		func(ctx context.Context) error {
			_, err := optimisticmysql.Update(ctx, waiter, tbl, 1, 1, map[string]any{"stock": 4})
			return err
		},
		func() (bool, error) {
			var n int
			err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", id).Scan(&n)
			return n == 1, err
		})
	t.Logf("mariadb: returned %v after cancel: %v", res.elapsed, res.err)
	// A *sql.Conn has no second connection to stop the statement from: the
	// outcome is unknown, and said so.
	var amb *concurkit.AmbiguousCommitError
	if !errors.Is(res.err, context.Canceled) || !errors.As(res.err, &amb) {
		t.Fatalf("err = %v; want *AmbiguousCommitError matching context.Canceled", res.err)
	}
	// The driver gave up on the connection; the server-side statement is
	// still queued behind the lock. Kill it so that it cannot apply after
	// the holder rolls back.
	if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", id)); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1094 { // 1094: unknown thread, already gone
			t.Fatal(err)
		}
	}
}

// Lock waits and running UPDATEs of the test's own database (testkit gives
// each test one), so parallel tests do not see each other's.
const (
	myWaitingInDB = "SELECT COUNT(*) FROM information_schema.INNODB_TRX x JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id WHERE x.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()"
	myUpdatesInDB = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'UPDATE %'"
)

// TestCancelWhileLockedMariaDBPool: on a *sql.DB (autocommit) a CAS that is
// queued behind a lock when its context ends must not be applied when the
// holder lets go. go-sql-driver only closes the socket, and the server used
// to run the queued UPDATE after the holder's COMMIT (stock 4, version 2)
// although the caller had been told context.Canceled.
func TestCancelWhileLockedMariaDBPool(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'sku-1', 5)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "SELECT 1 FROM inventory WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	count := func(q string) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	}
	tbl := optimistic.Table{Name: "inventory", KeyColumn: "id", VersionColumn: "version"}
	res := cancelBlocked(t,
		func(ctx context.Context) error {
			_, err := optimisticmysql.Update(ctx, db, tbl, 1, 1, map[string]any{"stock": 4})
			return err
		},
		func() (bool, error) { n, err := count(myWaitingInDB); return n == 1, err })
	t.Logf("mariadb pool: returned %v after cancel: %v", res.elapsed, res.err)
	var amb *concurkit.AmbiguousCommitError
	if !errors.Is(res.err, context.Canceled) || errors.As(res.err, &amb) {
		t.Fatalf("err = %v; want context.Canceled, outcome known", res.err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no UPDATE left on the server", func() (bool, error) { n, err := count(myUpdatesInDB); return n == 0, err })
	var stock, version int64
	if err := db.QueryRowContext(ctx, "SELECT stock, version FROM inventory WHERE id = 1").Scan(&stock, &version); err != nil {
		t.Fatal(err)
	}
	if stock != 5 || version != 1 {
		t.Fatalf("after the holder committed: stock %d version %d; want 5, 1 (the cancelled CAS must not apply)", stock, version)
	}
}
