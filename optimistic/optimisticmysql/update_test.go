package optimisticmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
)

// fakeDB answers every CAS with one affected row from memory, so that
// allocation counts measure Update itself, not the driver or the network.
// (A miss needs a *sql.Row, which only a driver can make: the conflict
// path is tested against MariaDB, and its hook emission is
// allocation-free without hooks, see optimistic/internal/cas.)
type fakeDB struct{}

type oneRow struct{}

func (oneRow) LastInsertId() (int64, error) { return 0, nil }
func (oneRow) RowsAffected() (int64, error) { return 1, nil }

func (fakeDB) ExecContext(context.Context, string, ...any) (sql.Result, error) { return oneRow{}, nil }
func (fakeDB) QueryContext(context.Context, string, ...any) (*sql.Rows, error) { return nil, nil }
func (fakeDB) QueryRowContext(context.Context, string, ...any) *sql.Row        { return nil }

// maxAllocsUpdate bounds the allocations of one successful Update (one set
// column, small key and version, statements cached, a handle that is not a
// *sql.DB, so no KILL QUERY watcher) with no hooks installed. Before the
// split and the statement cache the same call (optimistic.UpdateMySQL with
// this fake) allocated 24 times (26 under -race). Now it is 1 (the args
// slice); the bound leaves 2 for compiler and runtime changes.
const maxAllocsUpdate = 3

func TestUpdateAllocs(t *testing.T) {
	ctx := context.Background()
	tbl := optimistic.Table{Name: "counters"}
	set := map[string]any{"value": 7}
	n := testing.AllocsPerRun(1000, func() {
		if _, err := optimisticmysql.Update(ctx, fakeDB{}, tbl, 1, 1, set); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per successful Update: %v (before the change: 24, 26 under -race)", n)
	if n > maxAllocsUpdate {
		t.Errorf("a successful Update allocates %v times; want at most %d", n, maxAllocsUpdate)
	}
}

// TestMissInsideRepeatableReadReadsTheNewestRow: a CAS inside a REPEATABLE
// READ transaction whose snapshot predates the row must report
// ErrConflict (the UPDATE's current read found the row, with another
// version), not ErrNotFound. The follow-up read on a *sql.Tx is a locking
// (current) read for that reason; a plain SELECT there would read the old
// snapshot, miss the row and say "not found" (checked below as the
// negative control). On a *sql.DB the same miss uses a plain read, which
// in autocommit mode sees the newest row too.
func TestMissInsideRepeatableReadReadsTheNewestRow(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	tbl := optimistic.Table{Name: "counters"}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM counters").Scan(&n); err != nil { // fixes the snapshot
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO counters (id, value, version) VALUES (7, 0, 3)"); err != nil {
		t.Fatal(err)
	}
	var plain int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM counters WHERE id = 7").Scan(&plain); err != nil || plain != 0 {
		t.Fatalf("negative control: a plain read in the snapshot found %d rows (%v); want 0", plain, err)
	}
	if _, err := optimisticmysql.Update(ctx, tx, tbl, 7, 1, nil); !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("Tx: stale version of a row newer than the snapshot: %v; want ErrConflict", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := optimisticmysql.Update(ctx, db, tbl, 7, 1, nil); !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("DB: stale version: %v; want ErrConflict", err)
	}
	if _, err := optimisticmysql.Update(ctx, db, tbl, 8, 1, nil); !errors.Is(err, optimistic.ErrNotFound) {
		t.Fatalf("DB: missing key: %v; want ErrNotFound", err)
	}
}

// readHook is a transaction whose QueryRowContext — the read that follows
// a miss — first runs hook.
type readHook struct {
	*sql.Tx
	hook func()
}

func (r readHook) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	r.hook()
	return r.Tx.QueryRowContext(ctx, q, args...)
}

// TestMissReadDeadlockRetryable: the read that follows a miss is a locking
// read on a *sql.Tx or *sql.Conn, so it can be a deadlock victim (1213) —
// on Galera also the victim of another node's write (a brute-force abort).
// The server rolled the transaction (or the autocommit read) back and
// nothing was written, so the error must be retryable like a 1213 of the
// CAS itself (retry.IsRetryable: Do and InTx run the attempt again), not a
// final failure. The deadlock is forced: tx1 (READ COMMITTED, which keeps
// no lock on the row its CAS missed) holds row 2; between its miss on row
// 1 and its read, tx2 — heavier, so InnoDB spares it — locks row 1, then
// waits for row 2 while tx1's read waits for row 1.
func TestMissReadDeadlockRetryable(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO counters (id) SELECT seq FROM seq_1_to_20"); err != nil {
		t.Fatal(err)
	}
	tx2, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback()
	if _, err := tx2.ExecContext(ctx, "UPDATE counters SET value = value + 1 WHERE id >= 3"); err != nil {
		t.Fatal(err)
	}
	tx1, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback()
	if _, err := tx1.ExecContext(ctx, "UPDATE counters SET value = 1 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	tx := readHook{tx1, func() {
		if _, err := tx2.ExecContext(ctx, "UPDATE counters SET value = 1 WHERE id = 1"); err != nil {
			t.Error(err)
		}
		go func() {
			_, err := tx2.ExecContext(ctx, "UPDATE counters SET value = 1 WHERE id = 2")
			waited <- err
		}()
	}}
	_, err1 := optimisticmysql.Update(ctx, tx, optimistic.Table{Name: "counters"}, 1, 99, nil)
	if err2 := <-waited; err2 != nil {
		t.Fatalf("tx2, the heavier transaction, was chosen: %v (tx1: %v)", err2, err1)
	}
	var r interface{ Retryable() bool }
	if !errors.As(err1, &r) || !r.Retryable() || errors.Is(err1, optimistic.ErrConflict) {
		t.Fatalf("tx1's Update: %v; want the read's deadlock, retryable", err1)
	}
}
