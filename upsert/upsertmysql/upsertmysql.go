package upsertmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/internal/spec"
)

// DBTX is the database/sql query interface the functions need: *sql.DB,
// *sql.Conn and *sql.Tx satisfy it, so they run on a pool, a connection
// or inside a transaction.
type DBTX = sqldb.DBTX

var (
	_ DBTX = (*sql.DB)(nil)
	_ DBTX = (*sql.Conn)(nil)
	_ DBTX = (*sql.Tx)(nil)
)

// pkg prefixes this package's errors.
const pkg = "upsertmysql"

// Statements. %[1]s table, %[2]s column list, %[3]s placeholders,
// %[4]s key column, %[5]s assignments before the marker ("c = VALUES(c), ").
//
// The ON DUPLICATE KEY branch runs only when the key exists; evaluating
// LAST_INSERT_ID(-1) there makes the server return 2^64-1 (-1 as int64) as
// the statement's last-insert-id, which no insert produces (it would be the
// last auto-increment value of an unsigned BIGINT). The IF keeps the key's
// value and type unchanged.
const (
	upsertSQL = `INSERT INTO %[1]s (%[2]s) VALUES (%[3]s)
ON DUPLICATE KEY UPDATE %[5]s%[4]s = IF(LAST_INSERT_ID(-1), %[4]s, %[4]s)`

	// Locking read: the newest committed row, also inside a REPEATABLE READ
	// transaction whose snapshot predates it. %[1]s table, %[2]s columns,
	// %[3]s key column.
	selectSQL = `SELECT %[2]s FROM %[1]s WHERE %[3]s = ? LOCK IN SHARE MODE`

	existedMarker = -1
)

// execer runs one write statement of a call: mysqlcancel.Exec on the
// caller's handle, or ExecOn on the connection a *sql.DB call took.
type execer func(ctx context.Context, query string, args ...any) (sql.Result, error)

// write runs the INSERT … ON DUPLICATE KEY UPDATE through x and reports
// whether it inserted. auto says the statement runs alone (autocommit, a
// call on a *sql.DB): see again.
func write(ctx context.Context, x execer, auto bool, q spec.Quoted, s spec.Spec, row map[string]any, update bool) (bool, error) {
	var res sql.Result
	err := again(ctx, auto, func(ctx context.Context) error {
		var err error
		res, err = x(ctx, writeStatement(q, update), s.Args(row)...)
		return err
	})
	if err != nil {
		return false, spec.DriverError(ctx, pkg, "insert into "+s.Name(), err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return false, spec.DriverError(ctx, pkg, "insert into "+s.Name(), err)
	}
	return id != existedMarker, nil
}

// again runs fn, a statement that runs alone when auto is set (a call on a
// *sql.DB, autocommit), and runs it again under retry's default policy
// while the server answers that it rolled it back: a deadlock victim or,
// on Galera, a write set of another node certified first (1213), or
// MariaDB's 1020 — nothing was written. Elsewhere the error is returned as
// it is, retryable (retry.IsRetryable): in a *sql.Tx the 1213 rolled the
// caller's transaction back, for the caller's loop (pessimisticmysql.InTx)
// to run it again, and a *sql.Conn may be inside a transaction too.
func again(ctx context.Context, auto bool, fn func(ctx context.Context) error) error {
	err := fn(ctx)
	if !auto || err == nil || !retry.IsRetryable(err) || errors.Is(err, concurkit.ErrOutcomeUnknown) {
		return err
	}
	return retry.Do(ctx, retry.Policy{}, fn)
}

// read scans the returning columns of the row with row's key.
func read(ctx context.Context, db DBTX, auto bool, q spec.Quoted, s spec.Spec, row map[string]any, dest []any) error {
	return again(ctx, auto, func(ctx context.Context) error {
		return mysqlerr.Mark(db.QueryRowContext(ctx, readStatement(q), s.Key(row)).Scan(dest...))
	})
}

// Insert inserts row (column name → value; it must contain t.KeyColumn)
// unless a row with that key exists and reports whether it inserted, in
// one statement, whatever the DSN's clientFoundRows setting. The existing
// row is left unchanged. The statement sets LAST_INSERT_ID when the row
// existed, so a later SELECT LAST_INSERT_ID() on this connection returns
// 2^64-1. Cancellation is as the package documentation says.
//
// On a *sql.DB, a statement the server rolled back — a deadlock victim or,
// on Galera, a certification failure (1213), nothing written — is run
// again under retry's default policy; on a *sql.Tx or *sql.Conn that error
// is returned, retryable (retry.IsRetryable), for the caller's loop.
//
// Errors: before any I/O, an error matching concurkit.ErrInvalidArgument
// (nil db, invalid names, no key value); *concurkit.AmbiguousCommitError;
// or the driver's error wrapped as "upsertmysql: insert into <table>: …"
// (matching context.Canceled when ctx ended the statement).
func Insert(ctx context.Context, db DBTX, t upsert.Table, row map[string]any) (created bool, err error) {
	s, err := spec.Validate(pkg, db, "db", t, row, nil, nil)
	if err != nil {
		return false, err
	}
	q, err := s.Quote(pkg, ident.MySQL)
	if err != nil {
		return false, err
	}
	_, auto := db.(*sql.DB)
	return write(ctx, execOn(db), auto, q, s, row, false)
}

// execOn is mysqlcancel.Exec on db.
func execOn(db DBTX) execer {
	return func(ctx context.Context, query string, args ...any) (sql.Result, error) {
		return mysqlcancel.Exec(ctx, db, query, args...)
	}
}

// Upsert inserts row, or, if a row with its key exists, sets that row's
// other columns to row's values, and reports whether it inserted: one
// INSERT … ON DUPLICATE KEY UPDATE, then, if returning is not empty, a
// locking read of those columns into dest (a second round trip, on the
// same connection — on a *sql.DB, one connection taken from the pool for
// both, so the read sees the write even on a Galera node; pass a *sql.Tx
// to make them atomic). A row whose values did not change still reports
// created == false. Rolled-back statements are run again as in Insert.
//
// Errors: as Insert, plus upsert.ErrContended if the row kept disappearing
// before it could be read, and scan errors; returning and dest of
// different lengths, or a nil dest, match concurkit.ErrInvalidArgument.
func Upsert(ctx context.Context, db DBTX, t upsert.Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	return writeRead(ctx, db, t, row, true, returning, dest)
}

// InsertOrGet inserts row unless its key exists and scans the listed
// columns of the stored row (new or existing, unchanged) into dest;
// created reports which. It takes two statements: the insert, and a
// locking read that sees the newest committed row even in an older
// REPEATABLE READ snapshot. If the row is deleted between them the pair
// runs again, up to upsert.MaxReadAttempts times.
//
// Errors: as Upsert.
func InsertOrGet(ctx context.Context, db DBTX, t upsert.Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	return writeRead(ctx, db, t, row, false, returning, dest)
}

func writeRead(ctx context.Context, db DBTX, t upsert.Table, row map[string]any, update bool, returning []string, dest []any) (bool, error) {
	s, err := spec.Validate(pkg, db, "db", t, row, returning, dest)
	if err != nil {
		return false, err
	}
	q, err := s.Quote(pkg, ident.MySQL)
	if err != nil {
		return false, err
	}
	pool, auto := db.(*sql.DB)
	if !auto || len(returning) == 0 {
		return pair(ctx, execOn(db), db, auto, q, s, row, update, returning, dest)
	}
	// Both statements on one connection of the pool: the read then sees
	// the write, also on a Galera cluster, where another connection may
	// be on a node that has not applied it yet.
	conn, err := pool.Conn(ctx)
	if err != nil {
		return false, spec.DriverError(ctx, pkg, "insert into "+s.Name(), err)
	}
	defer conn.Close()
	x := func(ctx context.Context, query string, args ...any) (sql.Result, error) {
		return mysqlcancel.ExecOn(ctx, pool, conn, query, args...)
	}
	return pair(ctx, x, conn, true, q, s, row, update, returning, dest)
}

// pair runs the write through x and reads the row back on db, again while
// the row disappears in between.
func pair(ctx context.Context, x execer, db DBTX, auto bool, q spec.Quoted, s spec.Spec, row map[string]any, update bool, returning []string, dest []any) (bool, error) {
	for range upsert.MaxReadAttempts {
		created, err := write(ctx, x, auto, q, s, row, update)
		if err != nil || len(returning) == 0 {
			return created, err
		}
		err = read(ctx, db, auto, q, s, row, dest)
		if errors.Is(err, sql.ErrNoRows) {
			continue // deleted between the two statements: again
		}
		if err != nil {
			return false, spec.DriverError(ctx, pkg, "read back from "+s.Name(), err)
		}
		return created, nil
	}
	return false, s.Contended()
}

// writeStatement builds the marker INSERT; with update, the existing row's
// non-key columns take the row's values. Arguments: the row's values in
// q.Cols order.
func writeStatement(q spec.Quoted, update bool) string {
	var set strings.Builder
	if update {
		for _, c := range q.NonKey {
			fmt.Fprintf(&set, "%s = VALUES(%s), ", c, c)
		}
	}
	return fmt.Sprintf(upsertSQL, q.Table, strings.Join(q.Cols, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(q.Cols)), ", "), q.Key, set.String())
}

// readStatement builds the locking read of q.Returning; argument: the key.
func readStatement(q spec.Quoted) string {
	return fmt.Sprintf(selectSQL, q.Table, strings.Join(q.Returning, ", "), q.Key)
}
