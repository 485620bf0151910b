package fencedmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
)

// Lock waits and running writes of the test's own database (testkit gives
// each test one), so parallel tests do not see each other's.
const (
	myWaitingInDB = "SELECT COUNT(*) FROM information_schema.INNODB_TRX x JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id WHERE x.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()"
	myWritesInDB  = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND (INFO LIKE 'UPDATE %' OR INFO LIKE 'INSERT %')"
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

// TestCancelQueuedWriteMariaDB: a guarded write on a *sql.DB (autocommit)
// that is queued behind another transaction's lock when its context ends
// must not be applied once that transaction commits. go-sql-driver only
// closes the socket; the server used to run the queued statement anyway,
// after the caller had been told context.Canceled.
func TestCancelQueuedWrite(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	for _, ddl := range []string{myAccounts, myFences,
		"INSERT INTO accounts (id, owner, max_seen_token) VALUES (1, 'old', 3), (2, 'old', 3)",
		"INSERT INTO concurkit_fences (resource, max_seen_token) VALUES ('mailer', 3)",
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	readAccount := func(key int64) func() (string, int64) {
		return func() (o string, tk int64) {
			if err := db.QueryRowContext(ctx, "SELECT owner, max_seen_token FROM accounts WHERE id = ?", key).Scan(&o, &tk); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	for _, c := range []struct {
		name  string
		lock  string // the holder's locking read
		write func(ctx context.Context) error
		read  func() (string, int64)
	}{
		{"Write", "SELECT 1 FROM accounts WHERE id = 1 FOR UPDATE",
			func(ctx context.Context) error { return fencedmysql.Write(ctx, db, accounts, 1, 7, set("new", 7)) },
			readAccount(1)},
		{"Update", "SELECT 1 FROM accounts WHERE id = 2 FOR UPDATE",
			func(ctx context.Context) error { return fencedmysql.Update(ctx, db, accounts, 2, 7, set("new", 7)) },
			readAccount(2)},
		{"Admit", "SELECT 1 FROM concurkit_fences WHERE resource = 'mailer' FOR UPDATE",
			func(ctx context.Context) error { return fencedmysql.Admit(ctx, db, fenced.Fence{}, "mailer", 7) },
			func() (string, int64) {
				var tk int64
				if err := db.QueryRowContext(ctx, "SELECT max_seen_token FROM concurkit_fences WHERE resource = 'mailer'").Scan(&tk); err != nil {
					t.Fatal(err)
				}
				return "old", tk
			}},
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
			if !errors.Is(werr, context.Canceled) || errors.As(werr, &amb) || errors.Is(werr, concurkit.ErrOutcomeUnknown) {
				t.Fatalf("err = %v; want context.Canceled, outcome known", werr)
			}
			if err := holder.Commit(); err != nil {
				t.Fatal(err)
			}
			pollCount(t, db, "no write left on the server", myWritesInDB, func(n int) bool { return n == 0 })
			if owner, tok := c.read(); owner != "old" || tok != 3 {
				t.Fatalf("after the holder committed: owner %q token %d; want old, 3 (the cancelled write must not apply)", owner, tok)
			}
		})
	}
}
