package mysqlcancel

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"testing"
	"time"
	"weak"

	"go.uber.org/goleak"

	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ddl    = "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"
	bump   = "UPDATE t SET v = v + 1 WHERE id = 1"
	readV  = "SELECT v FROM t WHERE id = 1"
	waits  = "SELECT COUNT(*) FROM information_schema.INNODB_TRX x JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id WHERE x.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()"
	active = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'UPDATE t %'"
)

// fixture is a database with row t(1, v=10) and a holder transaction, on
// its own *sql.DB, that has locked the row.
type fixture struct {
	dsn    string
	db     *sql.DB // for the test's own queries
	holder *sql.Tx
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dsn := testkit.MySQLDSN(t)
	f := &fixture{dsn: dsn, db: testkit.MySQLFor(t, dsn)}
	ctx := t.Context()
	for _, s := range []string{ddl, "INSERT INTO t VALUES (1, 10)"} {
		if _, err := f.db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback() })
	if _, err := holder.ExecContext(ctx, "SELECT v FROM t WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	f.holder = holder
	return f
}

// poll runs q (a COUNT) until want(n) holds, failing after 30 s. InnoDB
// refreshes its INNODB_TRX cache only after 100 ms without readers, hence
// the 150 ms period.
func (f *fixture) poll(t *testing.T, what, q string, want func(n int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := f.db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// cancelWhileQueued runs the bump on h with the given budget, waits until
// the server shows it queued behind the holder's lock, cancels its context
// and returns its error (failing if it does not return within 10 s).
func (f *fixture) cancelWhileQueued(t *testing.T, h sqldb.DBTX, budget time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := exec(ctx, h, budget, bump, nil)
		done <- err
	}()
	f.poll(t, "the write to queue behind the lock", waits, func(n int) bool { return n >= 1 })
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled write did not return within 10 s")
		return nil
	}
}

// releaseAndRead commits the holder, waits until no UPDATE of this test's
// database is left on the server (an orphaned one would run now) and
// returns v.
func (f *fixture) releaseAndRead(t *testing.T) int64 {
	t.Helper()
	if err := f.holder.Commit(); err != nil {
		t.Fatal(err)
	}
	f.poll(t, "no UPDATE left running", active, func(n int) bool { return n == 0 })
	var v int64
	if err := f.db.QueryRowContext(t.Context(), readV).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCancelStopsQueuedWriteDB: on a *sql.DB the cancelled autocommit
// write is killed on the server, reported as cancelled (not ambiguous), and
// never applied.
func TestCancelStopsQueuedWriteDB(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := testkit.MySQLFor(t, f.dsn)
	start := time.Now()
	err := f.cancelWhileQueued(t, db, Budget)
	t.Logf("returned %v after start: %v", time.Since(start), err)
	var amb *sqlerr.AmbiguousCommitError
	if !errors.Is(err, context.Canceled) || errors.As(err, &amb) || mysqlerr.Number(err) != 1317 {
		t.Fatalf("err = %v; want context.Canceled with the server's 1317, not ambiguous", err)
	}
	if v := f.releaseAndRead(t); v != 10 {
		t.Fatalf("v = %d after the holder committed; want 10 (the cancelled write must not apply)", v)
	}
	// The pool is still usable.
	if _, err := Exec(t.Context(), db, bump); err != nil {
		t.Fatal(err)
	}
}

// TestExecOn: on a connection the caller took from a *sql.DB, the write
// runs in that session (a temporary table is the session's own), and a
// cancelled one is killed and never applied, as on the *sql.DB itself; the
// spoiled connection is closed when given back, and the pool goes on.
func TestExecOn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := testkit.MySQLFor(t, f.dsn)
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE mine (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := ExecOn(ctx, db, conn, "INSERT INTO mine VALUES (?)", 1); err != nil {
		t.Fatalf("ExecOn ran outside the connection's session: %v", err)
	}
	done := make(chan error, 1)
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, err := ExecOn(qctx, db, conn, bump)
		done <- err
	}()
	f.poll(t, "the write to queue behind the lock", waits, func(n int) bool { return n >= 1 })
	cancel()
	err = <-done
	var amb *sqlerr.AmbiguousCommitError
	if !errors.Is(err, context.Canceled) || errors.As(err, &amb) || mysqlerr.Number(err) != 1317 {
		t.Fatalf("err = %v; want context.Canceled with the server's 1317, not ambiguous", err)
	}
	if v := f.releaseAndRead(t); v != 10 {
		t.Fatalf("v = %d after the holder committed; want 10 (the cancelled write must not apply)", v)
	}
	if _, err := ExecOn(qctx, db, conn, bump); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v; want context.Canceled, nothing sent", err)
	}
	if _, err := Exec(ctx, db, bump); err != nil {
		t.Fatal(err)
	}
}

// TestCancelUnconfirmedIsAmbiguous: when the KILL cannot be sent (the
// pool's only connection runs the write) the outcome is unknown, and said.
func TestCancelUnconfirmedIsAmbiguous(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := testkit.MySQLFor(t, f.dsn)
	db.SetMaxOpenConns(1)
	err := f.cancelWhileQueued(t, db, 300*time.Millisecond)
	var amb *sqlerr.AmbiguousCommitError
	if !errors.As(err, &amb) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want *AmbiguousCommitError matching context.Canceled", err)
	}
	// The orphaned statement applies once the holder lets go: that is
	// exactly why the outcome had to be reported as unknown.
	if v := f.releaseAndRead(t); v != 11 {
		t.Logf("v = %d", v)
	}
}

// TestCancelOnConnIsAmbiguous: a *sql.Conn offers no second connection to
// KILL from.
func TestCancelOnConnIsAmbiguous(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	conn, err := f.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = f.cancelWhileQueued(t, conn, Budget)
	var amb *sqlerr.AmbiguousCommitError
	if !errors.As(err, &amb) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want *AmbiguousCommitError matching context.Canceled", err)
	}
	f.releaseAndRead(t)
}

// TestCancelInTxNeverCommits: in a transaction the dropped connection
// rolls the write back even though the server runs it after the holder
// lets go.
func TestCancelInTxNeverCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tx, err := f.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	err = f.cancelWhileQueued(t, tx, Budget)
	var amb *sqlerr.AmbiguousCommitError
	if !errors.Is(err, context.Canceled) || errors.As(err, &amb) {
		t.Fatalf("err = %v; want context.Canceled, not ambiguous", err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("COMMIT after the cancelled statement succeeded")
	}
	if v := f.releaseAndRead(t); v != 10 {
		t.Fatalf("v = %d; want 10", v)
	}
}

func TestExecResultAndDoneContext(t *testing.T) {
	t.Parallel()
	dsn := testkit.MySQLDSN(t)
	db := testkit.MySQLFor(t, dsn)
	ctx := t.Context()
	for _, s := range []string{ddl, "INSERT INTO t VALUES (1, 10)"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i, h := range []sqldb.DBTX{db, conn} {
		name := []string{"db", "conn"}[i]
		res, err := Exec(ctx, h, "UPDATE t SET v = ? WHERE id = ?", 20+i, 1)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows affected", name, n)
		}
		if _, err := Exec(ctx, h, "INSERT INTO t VALUES (1, 0)"); mysqlerr.Classify(err) != sqlerr.UniqueViolation {
			t.Fatalf("%s: duplicate insert = %v", name, err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		var amb *sqlerr.AmbiguousCommitError
		if _, err := Exec(done, h, bump); !errors.Is(err, context.Canceled) || errors.As(err, &amb) {
			t.Fatalf("%s: done context = %v; want context.Canceled, nothing sent", name, err)
		}
	}
	if _, err := Exec(ctx, tx, bump); err != nil {
		t.Fatal(err)
	}
}

// TestConnectionIDCache: the id is learned once per driver connection, is
// the server's, and the entry goes away with the connection.
func TestConnectionIDCache(t *testing.T) {
	// Not parallel: it counts the cache's entries.
	dsn := testkit.MySQLDSN(t)
	ctx := t.Context()
	before := cacheLen()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*sql.Conn, 4)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		id, err := connectionID(ctx, conns[i])
		if err != nil {
			t.Fatal(err)
		}
		var want uint64
		if err := conns[i].QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&want); err != nil {
			t.Fatal(err)
		}
		if id != want {
			t.Fatalf("cached id %d, server says %d", id, want)
		}
		if again, _ := connectionID(ctx, conns[i]); again != id {
			t.Fatalf("second lookup %d != %d", again, id)
		}
	}
	if got := cacheLen() - before; got != len(conns) {
		t.Fatalf("%d new cache entries; want %d", got, len(conns))
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	db.Close()
	deadline := time.Now().Add(10 * time.Second)
	for cacheLen() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d cache entries left after the connections were closed and collected", cacheLen()-before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// cacheLen counts every entry, dead weak pointers included: a cleanup
// that did not run would show here.
func cacheLen() int {
	n := 0
	ids.Range(func(k, _ any) bool {
		_ = k.(weak.Pointer[byte])
		n++
		return true
	})
	return n
}
