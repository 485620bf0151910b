package optimisticpg

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/internal/cas"
)

// DBTX is the pgx v5 query interface Update needs (the shape of sqlc's
// DBTX): *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy it,
// so Update runs on a pool, a connection or inside a transaction.
type DBTX = pgxdb.DBTX

var (
	_ DBTX = (*pgxpool.Pool)(nil)
	_ DBTX = (*pgxpool.Conn)(nil)
	_ DBTX = (*pgx.Conn)(nil)
	_ DBTX = pgx.Tx(nil)
)

// pkg prefixes this package's errors and names it in hook events.
const pkg = "optimisticpg"

// casSQL is the CAS statement. The CTE's UPDATE and the outer SELECT share
// one snapshot, so EXISTS sees the row as it was when the statement began:
// a row that exists but whose version moved (even if the UPDATE had to wait
// for another writer and then re-checked the newer version) is a conflict;
// no row at all is not-found. Placeholders: %[1]s table, %[2]s key column,
// %[3]s version column, %[4]s extra assignments (", col = $3, …"); $1 key,
// $2 expected version.
const casSQL = `WITH upd AS (
	UPDATE %[1]s SET %[3]s = %[3]s + 1%[4]s
	WHERE %[2]s = $1 AND %[3]s = $2
	RETURNING %[3]s
)
SELECT (SELECT %[3]s FROM upd), EXISTS (SELECT 1 FROM %[1]s WHERE %[2]s = $1)`

// statements caches the built CAS statement per (Table, set columns).
var statements cas.Cache[string]

// Update sets the columns in set (column name → value) and increments the
// version column of the row of t whose key column equals key, provided its
// version is expectedVersion, in one statement and one round trip. It
// returns the new version (expectedVersion+1). set may be empty: then only
// the version moves.
//
// A CAS that waits on a row locked by another writer re-checks the newest
// row version once the lock is released (READ COMMITTED), so it never
// overwrites a change it did not see. If that writer deleted the row, the
// result is optimistic.ErrConflict (the row existed when the statement
// began); the caller's re-read then finds it gone.
//
// Errors: optimistic.ErrConflict if the row exists with another version
// (also reported to observe.Hooks.Conflict of ctx, Package
// "optimisticpg"); optimistic.ErrNotFound (also matching sql.ErrNoRows and
// pgx.ErrNoRows) if no row has the key; before any I/O, an error matching
// concurkit.ErrInvalidArgument for a nil db, an invalid Table or column
// name, a set that assigns the key or version column, or
// expectedVersion <= 0, and optimistic.ErrVersionOverflow for
// expectedVersion math.MaxInt64; otherwise the driver's error wrapped as
// "optimisticpg: update <table>: …", which matches context.Canceled or
// context.DeadlineExceeded when ctx ended the statement.
func Update(ctx context.Context, db DBTX, t optimistic.Table, key any, expectedVersion int64, set map[string]any) (int64, error) {
	var buf [8]string
	t, cols, err := cas.Prepare(pkg, db, "db", t, expectedVersion, set, buf[:0])
	if err != nil {
		return 0, err
	}
	k := cas.KeyOf(t, cols)
	stmt, ok := statements.Load(k)
	if !ok {
		q, err := cas.Quote(pkg, t, cols, ident.Postgres)
		if err != nil {
			return 0, err
		}
		stmt = statement(q)
		statements.Store(k, stmt)
	}
	args := make([]any, 2, 2+len(cols))
	args[0], args[1] = key, expectedVersion
	for _, c := range cols {
		args = append(args, set[c])
	}
	var newVersion *int64
	var exists bool
	if err := db.QueryRow(ctx, stmt, args...).Scan(&newVersion, &exists); err != nil {
		return 0, cas.DriverError(ctx, pkg, "update "+cas.Name(t), err)
	}
	switch {
	case newVersion != nil:
		return *newVersion, nil
	case exists:
		return 0, cas.Conflict(ctx, pkg, t)
	}
	return 0, optimistic.ErrNotFound
}

// statement builds the CAS statement from quoted identifiers; the
// arguments are key, expected version, then the set values in q.Cols
// order.
func statement(q cas.Quoted) string {
	var assign strings.Builder
	for i, c := range q.Cols {
		fmt.Fprintf(&assign, ", %s = $%d", c, i+3)
	}
	return fmt.Sprintf(casSQL, q.Table, q.Key, q.Version, assign.String())
}
