package hotrowmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowmysql"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var stock = hotrow.Table{Name: "stock"}

// modes are the sql_modes every statement must mean the same under.
var modes = map[string]string{"default": "", "SIMULTANEOUS_ASSIGNMENT": "CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"}

// database returns a *sql.DB on a fresh database with table stock holding
// rows, its sessions in sql_mode (a DSN parameter value; "" = default).
func database(t *testing.T, mode string, rows map[int64]int64) *sql.DB {
	t.Helper()
	return databaseParams(t, mode, nil, rows)
}

// databaseParams is database with more session variables (DSN
// parameters).
func databaseParams(t *testing.T, mode string, params map[string]string, rows map[int64]int64) *sql.DB {
	t.Helper()
	db, _ := databaseDSN(t, mode, params, rows)
	return db
}

// databaseDSN is databaseParams, and the DSN of its database.
func databaseDSN(t *testing.T, mode string, params map[string]string, rows map[int64]int64) (*sql.DB, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testkit.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if mode != "" {
		cfg.Params["sql_mode"] = mode
	}
	maps.Copy(cfg.Params, params)
	dsn := cfg.FormatDSN()
	db := testkit.MySQLFor(t, dsn)
	var got string
	if err := db.QueryRowContext(t.Context(), "SELECT @@SESSION.sql_mode").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if mode != "" && !strings.Contains(got, "SIMULTANEOUS_ASSIGNMENT") {
		t.Fatalf("session sql_mode %q", got)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE stock (id BIGINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	for id, v := range rows {
		if _, err := db.ExecContext(t.Context(), `INSERT INTO stock VALUES (?, ?)`, id, v); err != nil {
			t.Fatal(err)
		}
	}
	return db, dsn
}

func value(t *testing.T, db hotrowmysql.DBTX, id int64) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRowContext(t.Context(), `SELECT v FROM stock WHERE id = ?`, id).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAdd: the escrow update, its refusals, and arithmetic at the edges,
// under both sql_modes.
func TestAdd(t *testing.T) {
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			db := database(t, mode, map[int64]int64{1: 5, 2: math.MaxInt64 - 1, 3: math.MinInt64 + 1})
			ctx := t.Context()
			zero := hotrow.AtLeast(0)
			for _, tc := range []struct {
				id, delta int64
				floor     *int64
				want      int64
				err       error
			}{
				{1, -3, zero, 2, nil},
				{1, -3, zero, 0, hotrow.ErrInsufficient},
				{1, -2, zero, 0, nil},
				{1, 0, zero, 0, nil},
				{1, 7, zero, 7, nil},
				{1, -8, nil, -1, nil},
				{1, -1, zero, 0, hotrow.ErrInsufficient},
				{1, 1, zero, 0, nil},
				{2, 1, nil, math.MaxInt64, nil},
				{2, 1, nil, 0, hotrow.ErrOverflow},
				{2, math.MinInt64, zero, 0, hotrow.ErrInsufficient},
				{2, math.MinInt64, nil, -1, nil},
				{3, -1, nil, math.MinInt64, nil},
				{3, -1, nil, 0, hotrow.ErrOverflow},
				{3, 0, nil, math.MinInt64, nil},
				{4, 1, nil, 0, hotrow.ErrNotFound},
				{4, 0, nil, 0, hotrow.ErrNotFound},
			} {
				v, err := hotrowmysql.Add(ctx, db, stock, tc.id, tc.delta, tc.floor)
				if v != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
					t.Errorf("Add(%d, %d, floor %v) = %d, %v; want %d, %v", tc.id, tc.delta, tc.floor != nil, v, err, tc.want, tc.err)
				}
			}
			if v := value(t, db, 2); v != -1 {
				t.Errorf("row 2 = %d, want -1", v)
			}
		})
	}
}

// TestAddInTransaction: a refused update leaves the caller's transaction
// usable, under READ COMMITTED and REPEATABLE READ, and its update is the
// transaction's (rolled back with it).
func TestAddInTransaction(t *testing.T) {
	db := database(t, "", map[int64]int64{1: 1, 2: math.MaxInt64})
	ctx := t.Context()
	for _, iso := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead} {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hotrowmysql.Add(ctx, tx, stock, 1, -2, hotrow.AtLeast(0)); !errors.Is(err, hotrow.ErrInsufficient) {
			t.Errorf("%s: %v, want ErrInsufficient", iso, err)
		}
		if _, err := hotrowmysql.Add(ctx, tx, stock, 2, 1, nil); !errors.Is(err, hotrow.ErrOverflow) {
			t.Errorf("%s: %v, want ErrOverflow", iso, err)
		}
		if v, err := hotrowmysql.Add(ctx, tx, stock, 1, -1, hotrow.AtLeast(0)); err != nil || v != 0 {
			t.Errorf("%s: Add after refusals = %d, %v", iso, v, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if v := value(t, db, 1); v != 1 {
			t.Errorf("%s: rolled back, row 1 = %d", iso, v)
		}
	}
}

// TestStockExact: the shared suite's 10,000 concurrent decrements of a
// stock of 1,000 (escrow and combined), under both sql_modes.
func TestStockExact(t *testing.T) {
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			db := database(t, mode, map[int64]int64{1: hotrowtest.Stock, 2: hotrowtest.Stock})
			st, err := hotrowmysql.NewStore[int64](db, stock)
			if err != nil {
				t.Fatal(err)
			}
			hotrowtest.StockExact(t, st, func(ctx context.Context, id, delta int64, floor *int64) (int64, error) {
				return hotrowmysql.Add(ctx, db, stock, id, delta, floor)
			}, func(t *testing.T, id int64) int64 { return value(t, db, id) })
		})
	}
}

func TestBadInput(t *testing.T) {
	var nilDB *sql.DB
	ctx := t.Context()
	db := testkit.MySQL(t)
	for name, err := range map[string]error{
		"nil db":       func() error { _, err := hotrowmysql.Add(ctx, nil, stock, 1, 1, nil); return err }(),
		"typed-nil db": func() error { _, err := hotrowmysql.Add(ctx, nilDB, stock, 1, 1, nil); return err }(),
		"empty table":  func() error { _, err := hotrowmysql.Add(ctx, db, hotrow.Table{}, 1, 1, nil); return err }(),
		"bad column": func() error {
			_, err := hotrowmysql.NewStore[int64](db, hotrow.Table{Name: "t", ValueColumn: "a\x00b"})
			return err
		}(),
		"nil store db": func() error { _, err := hotrowmysql.NewStore[int64](nilDB, stock); return err }(),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestCombinerKilledClient: a client process with 32 goroutines adding
// through one Combiner is SIGKILLed mid-stream (batches in flight), under
// both sql_modes: the row holds every acknowledged update plus at most the
// in-flight ones, never more.
func TestCombinerKilledClient(t *testing.T) {
	if dsn := os.Getenv(hotrowtest.KillEnv); dsn != "" {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			println("error", err.Error())
			select {}
		}
		st, err := hotrowmysql.NewStore[int64](db, stock)
		if err != nil {
			println("error", err.Error())
			select {}
		}
		hotrowtest.KilledClientChild(st, 1, os.Stdout)
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			db, dsn := databaseDSN(t, mode, nil, map[int64]int64{1: 100})
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCombinerKilledClient$", "-test.count=1")
			cmd.Env = append(os.Environ(), hotrowtest.KillEnv+"="+dsn)
			hotrowtest.KilledClient(t, cmd, 100, func(t *testing.T) int64 { return value(t, db, 1) })
		})
	}
}

// TestVersionColumn: every write of a table with a VersionColumn bumps the
// version, so optimisticmysql.Update conflicts with it, in both sql_modes
// (hotrowtest.VersionColumn).
func TestVersionColumn(t *testing.T) {
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			db := database(t, mode, map[int64]int64{1: 100, 2: 100})
			if _, err := db.ExecContext(t.Context(), `ALTER TABLE stock ADD COLUMN version BIGINT NOT NULL DEFAULT 1`); err != nil {
				t.Fatal(err)
			}
			cas := optimistic.Table{Name: "stock", KeyColumn: "id", VersionColumn: "version"}
			hotrowtest.VersionColumn(t, hotrowtest.Versioned{
				Add: func(ctx context.Context, tbl hotrow.Table, key, delta int64) error {
					_, err := hotrowmysql.Add(ctx, db, tbl, key, delta, nil)
					return err
				},
				Store: func(tbl hotrow.Table) (hotrow.Store[int64], error) { return hotrowmysql.NewStore[int64](db, tbl) },
				Ledger: func(tbl hotrow.Table) (hotrow.LedgerStore[int64], error) {
					return hotrowmysql.NewLedgerStore[int64](db, tbl)
				},
				Row: func(t *testing.T, key int64) (v, version int64) {
					if err := db.QueryRowContext(t.Context(), `SELECT v, version FROM stock WHERE id = ?`, key).Scan(&v, &version); err != nil {
						t.Fatal(err)
					}
					return v, version
				},
				CAS: func(ctx context.Context, key, version, v int64) error {
					_, err := optimisticmysql.Update(ctx, db, cas, key, version, map[string]any{"v": v})
					return err
				},
			})
		})
	}
}
