package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// The isolation cases: a transaction reads (taking its snapshot under
// REPEATABLE READ), another session then commits a change to the row, and
// the first transaction locks the row with LockRows and reads it again with
// a plain SELECT. want says what the plain read after the lock must see.
type isoCase struct {
	name      string
	level     sql.IsolationLevel
	readFirst bool // a plain read before the lock
	// fresh: the read after the lock sees the committed change;
	// staleOrSerial: it sees the snapshot (MariaDB REPEATABLE READ), or the
	// lock fails with ErrSerialization (PostgreSQL; MariaDB >= 11.6 1020).
	wantFresh bool
}

var isoCases = []isoCase{
	{"ReadCommitted", sql.LevelReadCommitted, true, true},
	{"RepeatableReadLockFirst", sql.LevelRepeatableRead, false, true},
	{"RepeatableReadReadFirst", sql.LevelRepeatableRead, true, false},
}

func checkIso(t *testing.T, tc isoCase, got int64, err error) {
	t.Helper()
	switch {
	case tc.wantFresh && (err != nil || got != 1):
		t.Fatalf("read after the lock = %d, %v; want the committed 1", got, err)
	case !tc.wantFresh && err == nil && got != 0:
		t.Fatalf("read after the lock = %d; want the snapshot's 0 or ErrSerialization", got)
	case !tc.wantFresh && err != nil && !errors.Is(err, pessimistic.ErrSerialization):
		t.Fatalf("err = %v; want the snapshot's 0 or ErrSerialization", err)
	}
	t.Logf("after the lock: %d, %v", got, err)
}

// TestLockThenReadIsolationPostgres: under REPEATABLE READ, locking a row
// changed after the snapshot is a serialization failure (so InTx retries
// and the stale snapshot is never used); under READ COMMITTED the read
// after the lock is current. (PostgreSQL takes the snapshot at the first
// statement of any kind — with Options.LockTimeout, InTx's own
// set_config — so "lock first" means no statement before LockRows.)
func TestLockThenReadIsolationPostgres(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	for _, tc := range isoCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, "DELETE FROM counters; INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
				t.Fatal(err)
			}
			var got int64
			err := pessimisticpg.InTx(ctx, pool, &pessimistic.Options{Isolation: tc.level, Retry: once}, func(ctx context.Context, tx pgx.Tx) error {
				if tc.readFirst {
					if err := tx.QueryRow(ctx, "SELECT value FROM counters WHERE id = 1").Scan(new(int64)); err != nil {
						return err
					}
				}
				if _, err := pool.Exec(ctx, "UPDATE counters SET value = 1 WHERE id = 1"); err != nil {
					return err
				}
				if _, err := pessimisticpg.LockRows(ctx, tx, "counters", "id", []int64{1}, pessimistic.Lock{}); err != nil {
					return err
				}
				return tx.QueryRow(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&got)
			})
			checkIso(t, tc, got, err)
		})
	}
}

// TestLockThenReadIsolationMariaDB: under MariaDB's default REPEATABLE
// READ, a plain SELECT after LockRowsMySQL reads the transaction's
// snapshot, taken at its first consistent read: if that read came before
// the lock, the value is stale (MariaDB 10.11; from 11.6 the lock fails
// with 1020 → ErrSerialization instead). Locking first, or READ COMMITTED,
// reads the current value.
func TestLockThenReadIsolationMariaDB(t *testing.T) {
	db := myDB(t, 4)
	ctx := t.Context()
	for _, tc := range isoCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := db.ExecContext(ctx, "DELETE FROM counters"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
				t.Fatal(err)
			}
			var got int64
			err := pessimisticmysql.InTx(ctx, db, &pessimistic.Options{Isolation: tc.level, Retry: once}, func(ctx context.Context, tx *sql.Tx) error {
				if tc.readFirst {
					if err := tx.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(new(int64)); err != nil {
						return err
					}
				}
				if _, err := db.ExecContext(ctx, "UPDATE counters SET value = 1 WHERE id = 1"); err != nil {
					return err
				}
				if _, err := pessimisticmysql.LockRows(ctx, tx, "counters", "id", []int64{1}, pessimistic.Lock{}); err != nil {
					return err
				}
				return tx.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&got)
			})
			checkIso(t, tc, got, err)
		})
	}
}
