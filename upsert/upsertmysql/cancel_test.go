package upsertmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/upsert/upsertmysql"
)

// Lock waits and running writes of the test's own database (testkit gives
// each test one), so parallel tests do not see each other's.
const (
	myWaitingInDB = "SELECT COUNT(*) FROM information_schema.INNODB_TRX x JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id WHERE x.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()"
	myInsertsInDB = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'INSERT %'"
)

// pollCount runs the COUNT query q until ok(n), failing after 30 s. InnoDB
// refreshes INNODB_TRX only after 100 ms without readers: 150 ms period.
func pollCount(t *testing.T, db *sql.DB, what, q string, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if ok(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// TestCancelQueuedWriteMariaDB: a MySQL write on a *sql.DB (autocommit)
// that waits for another transaction's lock on its key when its context
// ends must not happen once that transaction finishes. go-sql-driver only
// closes the socket; the server used to run the queued INSERT anyway (the
// row appeared after the holder rolled back; the update landed after it
// committed) although the caller had been told context.Canceled.
func TestCancelQueuedWriteMariaDB(t *testing.T) {
	t.Parallel()
	db := myDB(t, false)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO profiles (id, name, visits) VALUES (2, 'old', 1)"); err != nil {
		t.Fatal(err)
	}
	var got profile
	for _, c := range []struct {
		name string
		key  int64
		// lock runs in the holder: it inserts the key (then rolls back)
		// or locks the existing row (then commits).
		lock   string
		commit bool
		write  func(ctx context.Context) error
		want   string // the name stored afterwards; "" = no row
	}{
		{"Insert", 1, "INSERT INTO profiles (id, name) VALUES (1, 'holder')", false,
			func(ctx context.Context) error {
				_, err := upsertmysql.Insert(ctx, db, tbl, profile{ID: 1, Name: "new"}.row())
				return err
			}, ""},
		{"InsertOrGet", 1, "INSERT INTO profiles (id, name) VALUES (1, 'holder')", false,
			func(ctx context.Context) error {
				_, err := upsertmysql.InsertOrGet(ctx, db, tbl, profile{ID: 1, Name: "new"}.row(), returning, got.dest()...)
				return err
			}, ""},
		{"Upsert", 2, "SELECT 1 FROM profiles WHERE id = 2 FOR UPDATE", true,
			func(ctx context.Context) error {
				_, err := upsertmysql.Upsert(ctx, db, tbl, profile{ID: 2, Name: "new", Visits: 9}.row(), nil)
				return err
			}, "old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			holder, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			if _, err := holder.ExecContext(ctx, c.lock); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.write(wctx) }()
			pollCount(t, db, "the write to queue behind the lock", myWaitingInDB, func(n int) bool { return n == 1 })
			cancel()
			var werr error
			select {
			case werr = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled write did not return within 10 s")
			}
			var amb *concurkit.AmbiguousCommitError
			if !errors.Is(werr, context.Canceled) || errors.As(werr, &amb) {
				t.Fatalf("err = %v; want context.Canceled, outcome known", werr)
			}
			if c.commit {
				err = holder.Commit()
			} else {
				err = holder.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			pollCount(t, db, "no INSERT left on the server", myInsertsInDB, func(n int) bool { return n == 0 })
			var name string
			err = db.QueryRowContext(ctx, "SELECT name FROM profiles WHERE id = ?", c.key).Scan(&name)
			if errors.Is(err, sql.ErrNoRows) {
				err = nil
			}
			if err != nil || name != c.want {
				t.Fatalf("after the holder finished: name %q (%v); want %q (the cancelled write must not apply)", name, err, c.want)
			}
		})
	}
}
