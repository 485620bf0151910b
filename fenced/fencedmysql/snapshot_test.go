package fencedmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/testkit"
)

// The stale-holder-in-a-snapshot interleaving, for every guarded entry
// point: holder A writes with token 5 and commits; A then opens a
// transaction and reads an unrelated table, which fixes its REPEATABLE READ
// snapshot; its successor B writes with token 6 and commits; A, still in
// that transaction, writes again with token 5. The guarded statement sees
// B's token (DML reads the newest committed row) and changes nothing; the
// write must be refused, and B's data must survive A's COMMIT.

// snapshotEntry is one guarded entry point of a dialect: write runs it on h
// for key with token tok and data owner; read returns the stored owner
// ("" for Admit, which stores no data) and token.
type snapshotEntry[H any] struct {
	name  string
	write func(ctx context.Context, h H, key string, tok fenced.Token, owner string) error
	read  func(ctx context.Context, key string) (owner string, tok int64, err error)
}

func mysqlSnapshotEntries(db *sql.DB) []snapshotEntry[fencedmysql.DBTX] {
	readAccount := func(ctx context.Context, key string) (o string, tk int64, err error) {
		err = db.QueryRowContext(ctx, "SELECT owner, max_seen_token FROM accounts WHERE id = ?", key).Scan(&o, &tk)
		return
	}
	return []snapshotEntry[fencedmysql.DBTX]{
		{"Write", func(ctx context.Context, h fencedmysql.DBTX, key string, tok fenced.Token, owner string) error {
			return fencedmysql.Write(ctx, h, accounts, key, tok, set(owner, int64(tok)))
		}, readAccount},
		{"Update", func(ctx context.Context, h fencedmysql.DBTX, key string, tok fenced.Token, owner string) error {
			if _, err := db.ExecContext(ctx, "INSERT IGNORE INTO accounts (id) VALUES (?)", key); err != nil {
				return err
			}
			return fencedmysql.Update(ctx, h, accounts, key, tok, set(owner, int64(tok)))
		}, readAccount},
		{"Admit", func(ctx context.Context, h fencedmysql.DBTX, key string, tok fenced.Token, _ string) error {
			return fencedmysql.Admit(ctx, h, fenced.Fence{}, key, tok)
		}, func(ctx context.Context, key string) (string, int64, error) {
			var tk int64
			err := db.QueryRowContext(ctx, "SELECT max_seen_token FROM concurkit_fences WHERE resource = ?", key).Scan(&tk)
			return "", tk, err
		}},
	}
}

func TestStaleTokenInSnapshot(t *testing.T) {
	t.Parallel()
	dsn := testkit.MySQLDSN(t)
	db := testkit.MySQLFor(t, dsn)
	ctx := t.Context()
	for _, ddl := range []string{myAccounts, myFences, "CREATE TABLE other (x INT) ENGINE=InnoDB"} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	// clientFoundRows changes the affected-row counts the functions read,
	// so both settings are run.
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = true
	foundRows := testkit.MySQLFor(t, cfg.FormatDSN())

	for i, h := range []struct {
		name string
		db   *sql.DB
	}{{"default", db}, {"clientFoundRows", foundRows}} {
		for j, iso := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelReadCommitted} {
			for k, e := range mysqlSnapshotEntries(h.db) {
				t.Run(fmt.Sprintf("%s/%s/%s", h.name, iso, e.name), func(t *testing.T) {
					key := fmt.Sprint(100*i + 10*j + k + 1) // the accounts key is a BIGINT
					if err := e.write(ctx, h.db, key, 5, "A"); err != nil {
						t.Fatalf("A's first write: %v", err)
					}
					tx, err := h.db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					var n int
					if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM other").Scan(&n); err != nil {
						t.Fatal(err)
					}
					if err := e.write(ctx, h.db, key, 6, "B"); err != nil {
						t.Fatalf("B's write: %v", err)
					}
					if err := e.write(ctx, tx, key, 5, "A"); !errors.Is(err, fenced.ErrStaleToken) {
						t.Fatalf("A's write with token 5 after B's 6 = %v; want ErrStaleToken", err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					owner, tok, err := e.read(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					if tok != 6 || (e.name != "Admit" && owner != "B") {
						t.Fatalf("row after A's commit: owner %q token %d; want B's data, token 6", owner, tok)
					}
				})
			}
		}
	}

	// MariaDB 11.6+ (and 10.6.18+ when enabled) refuses the same write
	// earlier, with error 1020, when innodb_snapshot_isolation is on: a
	// retryable serialization failure, never an acceptance.
	t.Run("innodb_snapshot_isolation", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SET SESSION innodb_snapshot_isolation = ON"); err != nil {
			if mysqlerr.Number(err) == 1193 { // unknown system variable: server older than 10.6.18
				testkit.Unsupported(t, "no innodb_snapshot_isolation: %v", err)
			}
			t.Fatal(err)
		}
		for k, e := range mysqlSnapshotEntries(db) {
			key := fmt.Sprint(1000 + k)
			if err := e.write(ctx, db, key, 5, "A"); err != nil {
				t.Fatal(err)
			}
			tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM other").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if err := e.write(ctx, db, key, 6, "B"); err != nil {
				t.Fatal(err)
			}
			err = e.write(ctx, tx, key, 5, "A")
			_ = tx.Rollback()
			if mysqlerr.Classify(err) != sqlerr.Serialization || !retry.IsRetryable(err) {
				t.Fatalf("%s: A's write = %v; want MariaDB 1020 classified as a retryable serialization failure", e.name, err)
			}
			if _, tok, err := e.read(ctx, key); err != nil || tok != 6 {
				t.Fatalf("%s: token %d, %v; want 6", e.name, tok, err)
			}
		}
	})
}
