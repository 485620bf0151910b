package fencedmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
	"github.com/concurkit/concurkit/fenced/internal/fencedtest"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/testkit"
)

const (
	myAccounts = "CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner VARCHAR(64) NOT NULL DEFAULT '', amount BIGINT NOT NULL DEFAULT 0, max_seen_token BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
	myFences   = "CREATE TABLE concurkit_fences (resource VARCHAR(255) PRIMARY KEY, max_seen_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
	readRow    = "SELECT owner, amount, max_seen_token, version FROM accounts WHERE id = ?"
	casRow     = "UPDATE accounts SET amount = amount + ?, version = version + 1 WHERE id = ? AND version = ?"
)

var accounts = fencedtest.Accounts

func set(owner string, amount int64) map[string]any { return fencedtest.Set(owner, amount) }

// dialect returns the shared suite's view of fencedmysql on a fresh
// accounts table.
func dialect(t *testing.T) (fencedtest.Dialect, *sql.DB) {
	db := myDB(t)
	if _, err := db.ExecContext(t.Context(), myAccounts); err != nil {
		t.Fatal(err)
	}
	return dialectOn(db), db
}

func dialectOn(db *sql.DB) fencedtest.Dialect {
	return fencedtest.Dialect{
		Name: "mariadb",
		Write: func(ctx context.Context, t fenced.Table, key int64, tok fenced.Token, set map[string]any) error {
			return fencedmysql.Write(ctx, db, t, key, tok, set)
		},
		Update: func(ctx context.Context, t fenced.Table, key int64, tok fenced.Token, set map[string]any) error {
			return fencedmysql.Update(ctx, db, t, key, tok, set)
		},
		Exec: func(ctx context.Context, sql string) error { _, err := db.ExecContext(ctx, sql); return err },
		Read: func(ctx context.Context, key int64) (o string, a, tk, v int64, err error) {
			err = db.QueryRowContext(ctx, readRow, key).Scan(&o, &a, &tk, &v)
			return
		},
		CAS: func(ctx context.Context, key, version, delta int64) (int64, error) {
			res, err := db.ExecContext(ctx, casRow, delta, key, version)
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		},
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	d, _ := dialect(t)
	fencedtest.Write(t, d)
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	d, _ := dialect(t)
	fencedtest.Update(t, d)
}

func TestConcurrentWritersMaxTokenWins(t *testing.T) {
	t.Parallel()
	d, _ := dialect(t)
	fencedtest.ConcurrentWritersMaxTokenWins(t, d)
}

// TestVersionBump: a fenced write on a Table with VersionColumn bumps the
// version in the same statement, so a compare-and-swap with the version
// read before it fails. Run with and without clientFoundRows, which
// changes the affected-row counts Write interprets.
func TestVersionBump(t *testing.T) {
	t.Parallel()
	for _, foundRows := range []bool{false, true} {
		t.Run(fmt.Sprint("clientFoundRows=", foundRows), func(t *testing.T) {
			cfg, err := mysql.ParseDSN(testkit.MySQLDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			cfg.ClientFoundRows = foundRows
			db := testkit.MySQLFor(t, cfg.FormatDSN())
			if _, err := db.ExecContext(t.Context(), myAccounts); err != nil {
				t.Fatal(err)
			}
			fencedtest.VersionBump(t, dialectOn(db))
		})
	}
}

// TestSimultaneousAssignment runs the write suites on sessions with
// MariaDB's sql_mode SIMULTANEOUS_ASSIGNMENT, in which every assignment of
// ON DUPLICATE KEY UPDATE reads the old row: Write's guarded assignments
// must not depend on the token being assigned last.
func TestSimultaneousAssignment(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN(testkit.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"sql_mode": "CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"}
	dsn := cfg.FormatDSN()
	for name, suite := range map[string]func(*testing.T, fencedtest.Dialect){
		"Write": fencedtest.Write, "Update": fencedtest.Update, "VersionBump": fencedtest.VersionBump,
		"ConcurrentWritersMaxTokenWins": fencedtest.ConcurrentWritersMaxTokenWins,
	} {
		t.Run(name, func(t *testing.T) {
			db := testkit.MySQLFor(t, dsn)
			var mode string
			if err := db.QueryRowContext(t.Context(), "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil || !strings.Contains(mode, "SIMULTANEOUS_ASSIGNMENT") {
				t.Fatalf("session sql_mode %q %v", mode, err)
			}
			if _, err := db.ExecContext(t.Context(), "DROP TABLE IF EXISTS accounts; "+myAccounts); err != nil {
				t.Fatal(err)
			}
			suite(t, dialectOn(db))
		})
	}
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	my := myDB(t)
	t.Run("Write", func(t *testing.T) {
		fencedtest.CheckBadInput(t, func(tb fenced.Table, tok fenced.Token, set map[string]any) error {
			return fencedmysql.Write(ctx, my, tb, 1, tok, set)
		})
	})
	t.Run("Update", func(t *testing.T) {
		fencedtest.CheckBadInput(t, func(tb fenced.Table, tok fenced.Token, set map[string]any) error {
			return fencedmysql.Update(ctx, my, tb, 1, tok, set)
		})
	})
	t.Run("bad names", func(t *testing.T) {
		if _, err := fencedmysql.NewSequence(my, "a", "b", "c"); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("three-part sequence name: %v", err)
		}
		if _, err := fencedmysql.NewSequence(my, "trailing "); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("sequence name with a trailing space: %v", err)
		}
		if err := fencedmysql.Admit(ctx, my, fenced.Fence{}, "", 1); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("empty resource: %v", err)
		}
		if err := fencedmysql.Admit(ctx, my, fenced.Fence{}, "r", -1); !errors.Is(err, fenced.ErrInvalidToken) {
			t.Errorf("Admit token -1: %v", err)
		}
		if err := fencedmysql.Update(ctx, my, accounts, nil, 1, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("nil key: %v", err)
		}
	})
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := myDB(t)
	if _, err := db.ExecContext(ctx, myFences); err != nil {
		t.Fatal(err)
	}
	fencedtest.AdmitSequence(t, func(tok fenced.Token, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fencedmysql.Admit(ctx, tx, fenced.Fence{}, "mailer", tok); err != nil {
			return err
		}
		if !commit {
			return fencedtest.ErrRollback
		}
		return tx.Commit()
	})
}

func TestSequence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	my := myDB(t)
	if err := fencedmysql.CreateSequence(ctx, my, "tokens"); err != nil {
		t.Fatal(err)
	}
	if err := fencedmysql.CreateSequence(ctx, my, "tokens"); err != nil { // idempotent
		t.Fatal(err)
	}
	src, err := fencedmysql.NewSequence(my, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	fencedtest.Source(t, src)
}

func TestNotFoundMatchesNoRows(t *testing.T) {
	d, _ := dialect(t)
	err := d.Update(t.Context(), accounts, 404, 1, nil)
	if !errors.Is(err, fenced.ErrNotFound) || !errors.Is(err, sql.ErrNoRows) || observe.ErrorType(err) != "not_found" {
		t.Fatalf("update of a missing row = %v (type %q); want ErrNotFound, sql.ErrNoRows", err, observe.ErrorType(err))
	}
}

// TestHooks: every refusal is reported to FenceRejected with the token the
// locking read saw; accepted writes report nothing.
func TestHooks(t *testing.T) {
	t.Parallel()
	_, db := dialect(t)
	if _, err := db.ExecContext(t.Context(), myFences); err != nil {
		t.Fatal(err)
	}
	ctx, events := fencedtest.Rejections(t.Context())
	for _, err := range []error{
		fencedmysql.Write(ctx, db, accounts, 1, 9, set("a", 1)),
		fencedmysql.Write(ctx, db, accounts, 1, 9, set("a", 1)), // unchanged, equal token: accepted
		fencedmysql.Update(ctx, db, accounts, 1, 9, set("b", 2)),
		fencedmysql.Admit(ctx, db, fenced.Fence{}, "mailer", 9),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ev := events(); len(ev) != 0 {
		t.Fatalf("accepted writes reported %v", ev)
	}
	for _, err := range []error{
		fencedmysql.Write(ctx, db, accounts, 1, 7, set("stale", 1)),
		fencedmysql.Update(ctx, db, accounts, 1, 8, set("stale", 1)),
		fencedmysql.Admit(ctx, db, fenced.Fence{}, "mailer", 3),
	} {
		if !errors.Is(err, fenced.ErrStaleToken) || observe.ErrorType(err) != "stale_token" {
			t.Fatalf("stale write = %v (type %q)", err, observe.ErrorType(err))
		}
	}
	want := []observe.FenceEvent{
		{Package: "fencedmysql", Resource: "accounts", Token: 7, Seen: 9},
		{Package: "fencedmysql", Resource: "accounts", Token: 8, Seen: 9},
		{Package: "fencedmysql", Resource: "mailer", Token: 3, Seen: 9},
	}
	got := events()
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
