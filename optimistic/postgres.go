package optimistic

import (
	"context"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
)

// DBTX is the part of pgx v5 that UpdatePostgres uses; *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all satisfy it.
type DBTX = pgxdb.DBTX

// pgCAS is the PostgreSQL CAS statement. The CTE's UPDATE and the outer
// SELECT share one snapshot, so EXISTS sees the row as it was when the
// statement began: a row that exists but whose version moved (even if the
// UPDATE had to wait for another writer and then re-checked the newer
// version) is a conflict; no row at all is not-found. Placeholders: %[1]s
// table, %[2]s key column, %[3]s version column, %[4]s extra assignments
// (", col = $3, …"); $1 key, $2 expected version.
const pgCAS = `WITH upd AS (
	UPDATE %[1]s SET %[3]s = %[3]s + 1%[4]s
	WHERE %[2]s = $1 AND %[3]s = $2
	RETURNING %[3]s
)
SELECT (SELECT %[3]s FROM upd), EXISTS (SELECT 1 FROM %[1]s WHERE %[2]s = $1)`

// UpdatePostgres sets the columns in set (column name → value) and
// increments the version column of the row whose key column equals key,
// provided its version is expectedVersion, in one statement and one round
// trip. It returns the new version (expectedVersion+1).
//
// A CAS that waits on a row locked by another writer re-checks the newest
// row version once the lock is released (READ COMMITTED), so it never
// overwrites a change it did not see. If that writer deleted the row, the
// result is ErrConflict (the row existed when the statement began); the
// caller's re-read then finds it gone.
//
// Errors: ErrConflict if the row exists with another version; ErrNotFound
// (also matching sql.ErrNoRows) if no row has the key; ErrInvalidArgument,
// before any I/O, for a nil db, an invalid Table or column name, a set that
// assigns the key or version column, or expectedVersion <= 0;
// ErrVersionOverflow (also ErrInvalidArgument) for expectedVersion
// math.MaxInt64, whose successor does not fit; otherwise the
// driver's error, which matches context.Canceled or
// context.DeadlineExceeded when ctx ended the statement.
func UpdatePostgres(ctx context.Context, db DBTX, t Table, key any, expectedVersion int64, set map[string]any) (int64, error) {
	cols, err := t.validate(db, expectedVersion, set)
	if err != nil {
		return 0, err
	}
	q, err := t.quote(ident.Postgres, cols)
	if err != nil {
		return 0, err
	}
	args := make([]any, 2, 2+len(cols))
	args[0], args[1] = key, expectedVersion
	for _, c := range cols {
		args = append(args, set[c])
	}
	stmt := pgStatement(q)
	var newVersion *int64
	var exists bool
	if err := db.QueryRow(ctx, stmt, args...).Scan(&newVersion, &exists); err != nil {
		return 0, driverError(ctx, "update "+q.table, err)
	}
	var v int64
	if newVersion != nil {
		v = *newVersion
	}
	return outcome(newVersion != nil, exists, v)
}

// pgStatement builds the CAS statement from quoted identifiers; the
// arguments are key, expected version, then the set values in q.cols order.
func pgStatement(q quoted) string {
	var assign strings.Builder
	for i, c := range q.cols {
		fmt.Fprintf(&assign, ", %s = $%d", c, i+3)
	}
	return fmt.Sprintf(pgCAS, q.table, q.key, q.version, assign.String())
}
