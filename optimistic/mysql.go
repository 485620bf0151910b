package optimistic

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

// SQLDB is the part of database/sql that UpdateMySQL uses; *sql.DB,
// *sql.Conn and *sql.Tx all satisfy it.
type SQLDB = sqldb.DBTX

// myCAS is the MySQL/MariaDB CAS statement: the hand-written
// compare-and-swap, nothing more. A matching row always changes (its
// version moves), so the affected-rows count is 1 on success and 0 on a
// miss whether or not the DSN sets clientFoundRows (which counts matched
// instead of changed rows). Placeholders: %[1]s table, %[2]s key, %[3]s
// version, %[4]s assignments ("c = ?, "); the args are the set values in
// column order, the key, the expected version.
const myCAS = `UPDATE %[1]s SET %[4]s%[3]s = %[3]s + 1 WHERE %[2]s = ? AND %[3]s = ?`

// myExists tells a conflict from a missing row after a miss. It is a
// locking read: a plain SELECT inside a REPEATABLE READ transaction reads
// the transaction's snapshot, which may predate the row (or its deletion),
// whereas the UPDATE that missed read the newest committed row. After a
// miss in REPEATABLE READ the UPDATE normally already holds the row's
// lock (InnoDB keeps the locks of rows it examined), so this read rarely
// waits. Placeholders: %[1]s table, %[2]s key; arg: key.
const myExists = `SELECT 1 FROM %[1]s WHERE %[2]s = ? LOCK IN SHARE MODE`

// UpdateMySQL is UpdatePostgres for MySQL and MariaDB through
// database/sql (go-sql-driver/mysql): it sets the columns in set and
// increments the version of the row whose key column equals key if its
// version is expectedVersion, and returns the new version. The key column
// must be unique. It works with any DSN options (no multiStatements,
// interpolateParams or clientFoundRows requirement).
//
// A successful CAS is one statement, the hand-written
// UPDATE … SET …, version = version + 1 WHERE key = ? AND version = ?, and
// one round trip (go-sql-driver's default server-side prepare adds a
// prepare round trip per call unless the DSN sets interpolateParams=true).
// Only a miss costs a second statement, a locking read of the key, to tell
// ErrConflict from ErrNotFound. The session's LAST_INSERT_ID() is left
// alone.
//
// Cancellation: on a *sql.DB the statement runs on a connection of the
// pool, and if ctx ends while it runs (typically queued behind a row lock)
// UpdateMySQL stops it on the server with KILL QUERY sent through another
// connection and waits for its answer, so a cancelled call has not
// updated the row. If that cannot be confirmed within a few seconds the
// error is a *AmbiguousCommitError. Inside a *sql.Tx the driver drops the
// connection and the server rolls the transaction back, so the update can
// never commit. On a *sql.Conn no other connection is at hand to stop the
// statement: a call cut short by ctx returns *AmbiguousCommitError. In
// every case the error matches ctx.Err().
//
// Errors are those of UpdatePostgres: ErrConflict, ErrNotFound (matching
// sql.ErrNoRows), ErrInvalidArgument before any I/O (ErrVersionOverflow
// for expectedVersion math.MaxInt64), *AmbiguousCommitError, or the
// driver's error.
func UpdateMySQL(ctx context.Context, db SQLDB, t Table, key any, expectedVersion int64, set map[string]any) (int64, error) {
	cols, err := t.validate(db, expectedVersion, set)
	if err != nil {
		return 0, err
	}
	q, err := t.quote(ident.MySQL, cols)
	if err != nil {
		return 0, err
	}
	args := make([]any, 0, len(cols)+2)
	for _, c := range cols {
		args = append(args, set[c])
	}
	args = append(args, key, expectedVersion)
	res, err := mysqlcancel.Exec(ctx, db, myStatement(q), args...)
	if err != nil {
		return 0, driverError(ctx, "update "+q.table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, driverError(ctx, "update "+q.table, err)
	}
	if n > 0 {
		return outcome(true, true, expectedVersion+1)
	}
	var one int
	err = db.QueryRowContext(ctx, fmt.Sprintf(myExists, q.table, q.key), key).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return outcome(false, false, 0)
	case err != nil:
		return 0, driverError(ctx, "update "+q.table+": read key after a miss", err)
	}
	return outcome(false, true, 0)
}

// myStatement builds the CAS statement from quoted identifiers; the
// arguments are the set values in q.cols order, the key, then the
// expected version.
func myStatement(q quoted) string {
	var assign strings.Builder
	for _, c := range q.cols {
		fmt.Fprintf(&assign, "%s = ?, ", c)
	}
	return fmt.Sprintf(myCAS, q.table, q.key, q.version, assign.String())
}
