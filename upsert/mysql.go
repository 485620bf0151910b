package upsert

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/sqldb"
)

// SQLDB is the part of database/sql that the MySQL helpers use; *sql.DB,
// *sql.Conn and *sql.Tx all satisfy it.
type SQLDB = sqldb.DBTX

// MySQL statements. %[1]s table, %[2]s column list, %[3]s placeholders,
// %[4]s key column, %[5]s assignments before the marker ("c = VALUES(c), ").
//
// The ON DUPLICATE KEY branch runs only when the key exists; evaluating
// LAST_INSERT_ID(-1) there makes the server return 2^64-1 (-1 as int64) as
// the statement's last-insert-id, which no insert produces (it would be the
// last auto-increment value of an unsigned BIGINT). The IF keeps the key's
// value and type unchanged.
const (
	myUpsert = `INSERT INTO %[1]s (%[2]s) VALUES (%[3]s)
ON DUPLICATE KEY UPDATE %[5]s%[4]s = IF(LAST_INSERT_ID(-1), %[4]s, %[4]s)`

	// Locking read: the newest committed row, also inside a REPEATABLE READ
	// transaction whose snapshot predates it. %[1]s table, %[2]s columns,
	// %[3]s key column.
	mySelect = `SELECT %[2]s FROM %[1]s WHERE %[3]s = ? LOCK IN SHARE MODE`

	existedMarker = -1
)

// mysqlWrite runs the INSERT … ON DUPLICATE KEY UPDATE and reports whether
// it inserted.
func mysqlWrite(ctx context.Context, db SQLDB, q quoted, s spec, row map[string]any, update bool) (bool, error) {
	res, err := mysqlcancel.Exec(ctx, db, myWriteStatement(q, update), s.args(row)...)
	if err != nil {
		return false, driverError(ctx, "insert into "+q.table, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return false, driverError(ctx, "insert into "+q.table, err)
	}
	return id != existedMarker, nil
}

// mysqlRead scans the returning columns of the row with row's key.
func mysqlRead(ctx context.Context, db SQLDB, q quoted, s spec, row map[string]any, dest []any) error {
	return db.QueryRowContext(ctx, myReadStatement(q), row[s.cols[s.keyIndex]]).Scan(dest...)
}

// InsertMySQL is InsertPostgres for MySQL and MariaDB through database/sql:
// it inserts row unless a row with its key exists and reports whether it
// inserted, in one statement, whatever the DSN's clientFoundRows setting.
// The statement sets LAST_INSERT_ID when the row existed, so a later
// SELECT LAST_INSERT_ID() on this connection returns 2^64-1.
//
// Cancellation: given a *sql.DB (autocommit), a statement still running
// when ctx ends — typically queued behind another transaction's lock on
// the key — is stopped on the server (KILL QUERY from another pooled
// connection) before the call returns, so a cancelled insert did not
// happen; if that cannot be confirmed within a few seconds the error is a
// *AmbiguousCommitError. In a *sql.Tx the driver drops the connection and
// the server rolls the transaction back, so the write can never commit. On
// a *sql.Conn a call cut short by ctx returns *AmbiguousCommitError (no
// second connection to stop the statement from). The same holds for
// UpsertMySQL and InsertOrGetMySQL.
//
// Errors: ErrInvalidArgument before any I/O, *AmbiguousCommitError, or the
// driver's error (matching context.Canceled when ctx ended the statement).
func InsertMySQL(ctx context.Context, db SQLDB, t Table, row map[string]any) (created bool, err error) {
	s, err := t.validate(db, row, nil, nil)
	if err != nil {
		return false, err
	}
	q, err := t.quote(ident.MySQL, s)
	if err != nil {
		return false, err
	}
	return mysqlWrite(ctx, db, q, s, row, false)
}

// UpsertMySQL is UpsertPostgres for MySQL and MariaDB: one
// INSERT … ON DUPLICATE KEY UPDATE, then, if returning is not empty, a
// locking read of those columns into dest (a second round trip; pass a
// *sql.Tx or *sql.Conn to run both on one connection, or a transaction to
// make them atomic). A row whose values did not change still reports
// created == false.
//
// Errors: as InsertMySQL, plus ErrContended if the row kept disappearing
// before it could be read, and scan errors.
func UpsertMySQL(ctx context.Context, db SQLDB, t Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	return mysqlWriteRead(ctx, db, t, row, true, returning, dest)
}

// InsertOrGetMySQL is InsertOrGetPostgres for MySQL and MariaDB: it inserts
// row unless its key exists and scans the listed columns of the stored row
// (new or existing, unchanged) into dest. It takes two statements: the
// insert, and a locking read that sees the newest committed row even in an
// older REPEATABLE READ snapshot. If the row is deleted between them the
// pair runs again, up to MaxReadAttempts times.
//
// Errors: as InsertMySQL, plus ErrContended and scan errors.
func InsertOrGetMySQL(ctx context.Context, db SQLDB, t Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	return mysqlWriteRead(ctx, db, t, row, false, returning, dest)
}

func mysqlWriteRead(ctx context.Context, db SQLDB, t Table, row map[string]any, update bool, returning []string, dest []any) (bool, error) {
	s, err := t.validate(db, row, returning, dest)
	if err != nil {
		return false, err
	}
	q, err := t.quote(ident.MySQL, s)
	if err != nil {
		return false, err
	}
	for range MaxReadAttempts {
		created, err := mysqlWrite(ctx, db, q, s, row, update)
		if err != nil || len(returning) == 0 {
			return created, err
		}
		err = mysqlRead(ctx, db, q, s, row, dest)
		if errors.Is(err, sql.ErrNoRows) {
			continue // deleted between the two statements: again
		}
		if err != nil {
			return false, driverError(ctx, "read back from "+q.table, err)
		}
		return created, nil
	}
	return false, fmt.Errorf("%w: %s after %d attempts", ErrContended, q.table, MaxReadAttempts)
}

// myWriteStatement builds the marker INSERT; with update, the existing
// row's non-key columns take the row's values. Arguments: the row's values
// in q.cols order.
func myWriteStatement(q quoted, update bool) string {
	var set strings.Builder
	if update {
		for _, c := range q.nonKey {
			fmt.Fprintf(&set, "%s = VALUES(%s), ", c, c)
		}
	}
	return fmt.Sprintf(myUpsert, q.table, strings.Join(q.cols, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(q.cols)), ", "), q.key, set.String())
}

// myReadStatement builds the locking read of q.returning; argument: the key.
func myReadStatement(q quoted) string {
	return fmt.Sprintf(mySelect, q.table, strings.Join(q.returning, ", "), q.key)
}
