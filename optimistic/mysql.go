package optimistic

import (
	"context"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit/internal/dbtx"
	"github.com/concurkit/concurkit/internal/ident"
)

// SQLDB is the part of database/sql that UpdateMySQL uses; *sql.DB,
// *sql.Conn and *sql.Tx all satisfy it.
type SQLDB = dbtx.SQL

// myCAS is the MySQL/MariaDB CAS statement. It matches the row by key only
// and makes every assignment conditional on the version, so that the row
// is locked and examined whether or not the version matches. The outcome
// travels back in the OK packet's last-insert-id, set by LAST_INSERT_ID(expr)
// while the version assignment is evaluated (assignments run left to right,
// so the version column still holds its old value there):
//
//	expected+1 (> 0)  the version matched and the row was updated
//	-current   (< 0)  the row exists with another version: conflict
//	0                 no row matched, LAST_INSERT_ID(expr) never ran
//
// (The CAST keeps the negation legal for a BIGINT UNSIGNED version column,
// which MySQL would otherwise reject as out of range.)
// The server sends 0 when LAST_INSERT_ID(expr) was not evaluated by the
// statement, whatever the connection's earlier value. The affected-rows
// count is not used because it cannot tell a conflict from a missing row
// and its meaning changes with the clientFoundRows DSN option.
// Placeholders: %[1]s table, %[2]s key, %[3]s version, %[4]s conditional
// assignments ("c = IF(v = ?, ?, c), "); the args are, in order, (expected,
// value) per column, expected twice, key.
const myCAS = `UPDATE %[1]s SET %[4]s%[3]s = IF(%[3]s = ?, %[3]s + 1, %[3]s) + 0 * LAST_INSERT_ID(IF(%[3]s = ?, %[3]s + 1, -CAST(%[3]s AS SIGNED)))
WHERE %[2]s = ?`

// UpdateMySQL is UpdatePostgres for MySQL and MariaDB through
// database/sql (go-sql-driver/mysql): it sets the columns in set, increments
// the version of the row whose key column equals key if its version is
// expectedVersion, and returns the new version, in one statement and one
// round trip. It works with any DSN options (no multiStatements,
// interpolateParams or clientFoundRows requirement).
//
// The statement uses LAST_INSERT_ID(expr) to report its outcome, so on this
// connection a later SELECT LAST_INSERT_ID() returns that value rather than
// the last auto-increment id; call LastInsertId on your own INSERT results
// instead. The key column must be unique.
//
// Errors are those of UpdatePostgres: ErrConflict, ErrNotFound (matching
// sql.ErrNoRows), ErrInvalidArgument before any I/O, or the driver's error
// (matching context.Canceled or context.DeadlineExceeded when ctx ended the
// statement).
func UpdateMySQL(ctx context.Context, db SQLDB, t Table, key any, expectedVersion int64, set map[string]any) (int64, error) {
	cols, err := t.validate(db, expectedVersion, set)
	if err != nil {
		return 0, err
	}
	q, err := t.quote(ident.MySQL, cols)
	if err != nil {
		return 0, err
	}
	args := make([]any, 0, 2*len(cols)+3)
	for _, c := range cols {
		args = append(args, expectedVersion, set[c])
	}
	args = append(args, expectedVersion, expectedVersion, key)
	stmt := myStatement(q)
	res, err := db.ExecContext(ctx, stmt, args...)
	if err != nil {
		return 0, driverError(ctx, "update "+q.table, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, driverError(ctx, "update "+q.table, err)
	}
	return outcome(id > 0, id != 0, id)
}

// myStatement builds the CAS statement from quoted identifiers; the
// arguments are (expected version, value) per column in q.cols order, the
// expected version twice, then the key.
func myStatement(q quoted) string {
	var assign strings.Builder
	for _, c := range q.cols {
		fmt.Fprintf(&assign, "%s = IF(%s = ?, ?, %s), ", c, q.version, c)
	}
	return fmt.Sprintf(myCAS, q.table, q.key, q.version, assign.String())
}
