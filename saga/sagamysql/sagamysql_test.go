package sagamysql_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/internal/sagatest"
	"github.com/concurkit/concurkit/saga/sagamysql"
	"github.com/concurkit/concurkit/testkit"
)

// TestSuite runs the saga suite on MariaDB.
func TestSuite(t *testing.T) { sagatest.Run(t, harness) }

// sagaDDL is the toolkit migration of the sagas table.
func sagaDDL(t *testing.T) string {
	t.Helper()
	fsys, err := migrations.FS(migrations.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, "0004_saga.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newStore(t *testing.T, db sagamysql.DBTX) *sagamysql.Store {
	t.Helper()
	s, err := sagamysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// harness returns the suite's harness on a fresh database holding the
// sagas table (the toolkit migration) and the effects table.
func harness(t *testing.T) *sagatest.Harness { return harnessFor(t, testkit.MySQLDSN(t)) }

func harnessFor(t *testing.T, dsn string) *sagatest.Harness {
	db := testkit.MySQLFor(t, dsn)
	for _, ddl := range []string{sagaDDL(t), sagatest.EffectsDDLMySQL} {
		if _, err := db.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	main := newStore(t, db)
	return &sagatest.Harness{
		Store: func(t *testing.T) saga.Store { return newStore(t, testkit.MySQLFor(t, dsn)) },
		Crashable: func(t *testing.T) (saga.Store, func()) {
			conn, err := testkit.MySQLFor(t, dsn).Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			var id int64
			if err := conn.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			return newStore(t, conn), func() { kill(t, db, id) }
		},
		Effect: func(ctx context.Context, key string) error {
			_, err := db.ExecContext(ctx, "INSERT INTO saga_effects (effect_key) VALUES (?) ON DUPLICATE KEY UPDATE applied = applied + 1", key)
			return err
		},
		Effects: func(ctx context.Context) ([]string, error) {
			rows, err := db.QueryContext(ctx, "SELECT effect_key FROM saga_effects")
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var keys []string
			for rows.Next() {
				var k string
				if err := rows.Scan(&k); err != nil {
					return nil, err
				}
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return keys, rows.Err()
		},
		LockRow: func(t *testing.T, key string) (time.Time, func()) {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			unlock := func() { _ = tx.Rollback() }
			var lease string
			if err := tx.QueryRowContext(t.Context(), "SELECT CAST(lease_until AS CHAR) FROM concurkit_sagas WHERE saga_key = ? FOR UPDATE", key).Scan(&lease); err != nil {
				unlock()
				t.Fatal(err)
			}
			at, err := time.ParseInLocation("2006-01-02 15:04:05.999999", lease, time.UTC)
			if err != nil {
				unlock()
				t.Fatal(err)
			}
			return at, unlock
		},
		Load:       main.Load,
		Unfinished: main.Unfinished,
	}
}

// kill ends connection id on the server and waits (up to 10 s) until it is
// gone, so that its next statement surely fails.
func kill(t *testing.T, db *sql.DB, id int64) {
	ctx := context.WithoutCancel(t.Context())
	if _, err := db.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
		t.Errorf("KILL %d: %v", id, err)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE id = ?", id).Scan(&n); err != nil {
			t.Errorf("processlist: %v", err)
			return
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("connection %d still alive 10 s after KILL", id)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSuiteDSNOptions runs the suite through a DSN with the driver options
// that change what the server reports and how times travel: affected rows
// counted as found (clientFoundRows), times as text (no parseTime) and a
// connection time zone far from UTC. The store must not depend on them.
func TestSuiteDSNOptions(t *testing.T) {
	sagatest.Run(t, func(t *testing.T) *sagatest.Harness {
		cfg, err := mysql.ParseDSN(testkit.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientFoundRows, cfg.ParseTime = true, false
		if cfg.Loc, err = time.LoadLocation("Asia/Tokyo"); err != nil {
			cfg.Loc = time.FixedZone("UTC+9", 9*3600)
		}
		return harnessFor(t, cfg.FormatDSN())
	})
}

// TestSuiteSimultaneousAssignment runs the suite on sessions with
// MariaDB's sql_mode SIMULTANEOUS_ASSIGNMENT, in which every assignment of
// an UPDATE (and of ON DUPLICATE KEY UPDATE) reads the row's old values
// instead of those assigned to its left: the claim must not depend on the
// evaluation order (ClaimIsExclusive, ConcurrentResume).
func TestSuiteSimultaneousAssignment(t *testing.T) {
	sagatest.Run(t, func(t *testing.T) *sagatest.Harness {
		dsn := simultaneousDSN(t, testkit.MySQLDSN(t))
		var mode string
		if err := testkit.MySQLFor(t, dsn).QueryRowContext(t.Context(), "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(mode, "SIMULTANEOUS_ASSIGNMENT") {
			t.Fatalf("session sql_mode %q", mode)
		}
		return harnessFor(t, dsn)
	})
}

// simultaneousDSN returns dsn with SIMULTANEOUS_ASSIGNMENT added to the
// server's sql_mode on every connection (the driver sends DSN parameters
// it does not know as SET statements).
func simultaneousDSN(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["sql_mode"] = "CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"
	return cfg.FormatDSN()
}

func TestBadInput(t *testing.T) {
	var nilDB *sql.DB
	for name, db := range map[string]sagamysql.DBTX{"nil": nil, "typed nil": nilDB} {
		if _, err := sagamysql.New(db, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%s): %v", name, err)
		}
	}
	db := testkit.MySQL(t)
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := sagamysql.New(tx, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("New(*sql.Tx): %v", err)
	}
	for _, tbl := range []saga.Table{{Name: strings.Repeat("t", 65)}, {Schema: "a\x00", Name: "t"}, {Name: "trailing "}} {
		if _, err := sagamysql.New(db, &sagamysql.Config{Table: tbl}); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%+v): %v", tbl, err)
		}
	}
	s := newStore(t, db)
	ctx := t.Context()
	if _, _, err := s.Claim(ctx, nil, time.Now()); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Claim(nil): %v", err)
	}
	if err := s.Save(ctx, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Save(nil): %v", err)
	}
	if _, err := s.Unfinished(ctx, time.Now(), 0); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Unfinished(limit 0): %v", err)
	}
	if _, err := s.DeleteFinished(ctx, time.Now(), 0); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("DeleteFinished(limit 0): %v", err)
	}
}

// TestTableAndReaper: a store on a database-qualified table of another
// name; DeleteFinished removes finished instances updated before the
// cutoff only, in batches.
func TestTableAndReaper(t *testing.T) {
	dsn := testkit.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg.DBName
	cfg.DBName = ""
	db := testkit.MySQLFor(t, cfg.FormatDSN()) // no default database
	ddl := strings.Replace(sagaDDL(t), "EXISTS concurkit_sagas (", "EXISTS `"+other+"`.my_sagas (", 1)
	if _, err := db.ExecContext(t.Context(), ddl); err != nil {
		t.Fatal(err)
	}
	s, err := sagamysql.New(db, &sagamysql.Config{Table: saga.Table{Schema: other, Name: "my_sagas"}})
	if err != nil {
		t.Fatal(err)
	}
	sagatest.Reaper(t, s, s.DeleteFinished, s.Load)
}

func BenchmarkRun(b *testing.B) {
	db := testkit.MySQL(b)
	fsys, err := migrations.FS(migrations.MySQL)
	if err != nil {
		b.Fatal(err)
	}
	ddl, err := fs.ReadFile(fsys, "0004_saga.up.sql")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(b.Context(), string(ddl)); err != nil {
		b.Fatal(err)
	}
	s, err := sagamysql.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	sagatest.Bench(b, s)
}
