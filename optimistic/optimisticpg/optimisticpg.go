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

// casSQL is the CAS statement: the hand-written compare-and-swap, nothing
// more, so a successful CAS costs what hand-written code costs (one
// statement, one round trip, the row count read from the command tag).
// Placeholders: %[1]s table, %[2]s key column, %[3]s version column, %[4]s
// extra assignments (", col = $3, …"); $1 key, $2 expected version.
const casSQL = `UPDATE %[1]s SET %[3]s = %[3]s + 1%[4]s WHERE %[2]s = $1 AND %[3]s = $2`

// existsSQL tells a conflict from a missing row after a miss, so only the
// miss pays for it (a second round trip). In READ COMMITTED it reads the
// newest committed row; in REPEATABLE READ or SERIALIZABLE the
// transaction's snapshot, which is where the UPDATE looked too (a row
// changed after the snapshot makes the UPDATE fail with a serialization
// error instead of missing). Placeholders: %[1]s table, %[2]s key; $1 key.
const existsSQL = `SELECT EXISTS (SELECT 1 FROM %[1]s WHERE %[2]s = $1)`

// stmts are the two statements of one (Table, set columns).
type stmts struct{ cas, exists string }

// statements caches the built statements per (Table, set columns).
var statements cas.Cache[stmts]

// Update sets the columns in set (column name → value) and increments the
// version column of the row of t whose key column equals key, provided its
// version is expectedVersion. It returns the new version
// (expectedVersion+1). set may be empty: then only the version moves.
//
// A successful CAS is one statement and one round trip, the hand-written
// UPDATE … SET version = version + 1, … WHERE key = $1 AND version = $2.
// Only a miss costs a second statement, which reads whether the key exists
// to tell optimistic.ErrConflict from optimistic.ErrNotFound.
//
// A CAS that waits on a row locked by another writer re-checks the newest
// row version once the lock is released (READ COMMITTED), so it never
// overwrites a change it did not see. If that writer deleted the row, the
// result is optimistic.ErrNotFound.
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
	st, ok := statements.Load(k)
	if !ok {
		q, err := cas.Quote(pkg, t, cols, ident.Postgres)
		if err != nil {
			return 0, err
		}
		st = build(q)
		statements.Store(k, st)
	}
	args := make([]any, 2, 2+len(cols))
	args[0], args[1] = key, expectedVersion
	for _, c := range cols {
		args = append(args, set[c])
	}
	tag, err := db.Exec(ctx, st.cas, args...)
	if err != nil {
		return 0, cas.DriverError(ctx, pkg, "update "+cas.Name(t), err)
	}
	if tag.RowsAffected() > 0 {
		return expectedVersion + 1, nil
	}
	var exists bool
	if err := db.QueryRow(ctx, st.exists, key).Scan(&exists); err != nil {
		return 0, cas.DriverError(ctx, pkg, "update "+cas.Name(t)+": read key after a miss", err)
	}
	if exists {
		return 0, cas.Conflict(ctx, pkg, t)
	}
	return 0, optimistic.ErrNotFound
}

// build makes both statements from quoted identifiers; the CAS's
// arguments are key, expected version, then the set values in q.Cols
// order.
func build(q cas.Quoted) stmts {
	var assign strings.Builder
	for i, c := range q.Cols {
		fmt.Fprintf(&assign, ", %s = $%d", c, i+3)
	}
	return stmts{
		cas:    fmt.Sprintf(casSQL, q.Table, q.Key, q.Version, assign.String()),
		exists: fmt.Sprintf(existsSQL, q.Table, q.Key),
	}
}
