package optimisticmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/internal/cas"
)

// DBTX is the database/sql query interface Update needs: *sql.DB,
// *sql.Conn and *sql.Tx satisfy it, so Update runs on a pool, a
// connection or inside a transaction.
type DBTX = sqldb.DBTX

var (
	_ DBTX = (*sql.DB)(nil)
	_ DBTX = (*sql.Conn)(nil)
	_ DBTX = (*sql.Tx)(nil)
)

// pkg prefixes this package's errors and names it in hook events.
const pkg = "optimisticmysql"

// casSQL is the CAS statement: the hand-written compare-and-swap, nothing
// more. A matching row always changes (its version moves), so the
// affected-rows count is 1 on success and 0 on a miss whether or not the
// DSN sets clientFoundRows (which counts matched instead of changed rows).
// Placeholders: %[1]s table, %[2]s key, %[3]s version, %[4]s assignments
// ("c = ?, "); the args are the set values in column order, the key, the
// expected version.
const casSQL = `UPDATE %[1]s SET %[4]s%[3]s = %[3]s + 1 WHERE %[2]s = ? AND %[3]s = ?`

// existsSQL tells a conflict from a missing row after a miss on a pool
// (*sql.DB): every statement there runs in autocommit mode and gets a
// fresh read view, so a plain (non-locking) read sees the newest
// committed row, and it never queues behind the writers that hold the
// row's lock — on a hot row there always is one, and a locking read
// would wait for its commit. Placeholders: %[1]s table, %[2]s key; arg:
// key.
const existsSQL = `SELECT 1 FROM %[1]s WHERE %[2]s = ?`

// existsLockingSQL is existsSQL for a *sql.Tx or *sql.Conn, which may be
// inside a transaction. It is a locking read: a plain SELECT inside a
// REPEATABLE READ transaction reads the transaction's snapshot, which may
// predate the row (or its deletion), whereas the UPDATE that missed read
// the newest committed row. After a miss in REPEATABLE READ the UPDATE
// normally already holds the row's lock (InnoDB keeps the locks of rows it
// examined), so this read rarely waits.
const existsLockingSQL = existsSQL + ` LOCK IN SHARE MODE`

// stmts are the statements of one (Table, set columns).
type stmts struct{ cas, exists, existsLocking string }

var statements cas.Cache[stmts]

// Update sets the columns in set (column name → value) and increments the
// version of the row of t whose key column equals key if its version is
// expectedVersion, and returns the new version (expectedVersion+1). The
// key column must be unique. It works with any DSN options (no
// multiStatements, interpolateParams or clientFoundRows requirement).
//
// A successful CAS is one statement, the hand-written
// UPDATE … SET …, version = version + 1 WHERE key = ? AND version = ?, and
// one round trip (go-sql-driver's default server-side prepare adds a
// prepare round trip per call unless the DSN sets interpolateParams=true).
// Only a miss costs a second statement, a read of the key, to tell
// optimistic.ErrConflict from optimistic.ErrNotFound: a plain read on a
// *sql.DB (autocommit: it sees the newest committed row without queueing
// behind the row's lock holders), a locking read on a *sql.Tx or
// *sql.Conn (a REPEATABLE READ snapshot could be stale). The session's
// LAST_INSERT_ID() is left alone.
//
// Cancellation: on a *sql.DB the statement runs on a connection of the
// pool, and if ctx ends while it runs (typically queued behind a row lock)
// Update stops it on the server with KILL QUERY sent through another
// connection and waits for its answer, so a cancelled call has not
// updated the row. If that cannot be confirmed within a few seconds the
// error is a *concurkit.AmbiguousCommitError. Inside a *sql.Tx the driver
// drops the connection and the server rolls the transaction back, so the
// update can never commit. On a *sql.Conn no other connection is at hand
// to stop the statement: a call cut short by ctx returns
// *concurkit.AmbiguousCommitError. In every case the error matches
// ctx.Err().
//
// Errors: optimistic.ErrConflict (also reported to observe.Hooks.Conflict
// of ctx, Package "optimisticmysql"); optimistic.ErrNotFound (matching
// sql.ErrNoRows); before any I/O, an error matching
// concurkit.ErrInvalidArgument (nil db, invalid names, a set assigning the
// key or version, expectedVersion <= 0) or optimistic.ErrVersionOverflow
// (expectedVersion math.MaxInt64); *concurkit.AmbiguousCommitError; or the
// driver's error wrapped as "optimisticmysql: update <table>: …". A
// deadlock (1213; on Galera also a certification failure or a brute-force
// abort) or MariaDB's 1020, of the CAS or of the read after a miss, was
// rolled back and is retryable (retry.IsRetryable): optimistic.Do and
// pessimisticmysql.InTx run the attempt again.
func Update(ctx context.Context, db DBTX, t optimistic.Table, key any, expectedVersion int64, set map[string]any) (int64, error) {
	var buf [8]string
	t, cols, err := cas.Prepare(pkg, db, "db", t, expectedVersion, set, buf[:0])
	if err != nil {
		return 0, err
	}
	k := cas.KeyOf(t, cols)
	st, ok := statements.Load(k)
	if !ok {
		q, err := cas.Quote(pkg, t, cols, ident.MySQL)
		if err != nil {
			return 0, err
		}
		st = build(q)
		statements.Store(k, st)
	}
	args := make([]any, 0, len(cols)+2)
	for _, c := range cols {
		args = append(args, set[c])
	}
	args = append(args, key, expectedVersion)
	res, err := mysqlcancel.Exec(ctx, db, st.cas, args...)
	if err != nil {
		return 0, cas.DriverError(ctx, pkg, "update "+cas.Name(t), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, cas.DriverError(ctx, pkg, "update "+cas.Name(t), err)
	}
	if n > 0 {
		return expectedVersion + 1, nil
	}
	exists := st.existsLocking
	if _, ok := db.(*sql.DB); ok {
		exists = st.exists
	}
	var one int
	err = db.QueryRowContext(ctx, exists, key).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, optimistic.ErrNotFound
	case err != nil:
		// A locking read can be a deadlock victim (on Galera, also of
		// another node's write): rolled back, nothing written, retryable
		// like the CAS's own 1213.
		return 0, cas.DriverError(ctx, pkg, "update "+cas.Name(t)+": read key after a miss", mysqlerr.Mark(err))
	}
	return 0, cas.Conflict(ctx, pkg, t)
}

// build makes both statements from quoted identifiers; the CAS's
// arguments are the set values in q.Cols order, the key, then the expected
// version.
func build(q cas.Quoted) stmts {
	var assign strings.Builder
	for _, c := range q.Cols {
		fmt.Fprintf(&assign, "%s = ?, ", c)
	}
	return stmts{
		cas:           fmt.Sprintf(casSQL, q.Table, q.Key, q.Version, assign.String()),
		exists:        fmt.Sprintf(existsSQL, q.Table, q.Key),
		existsLocking: fmt.Sprintf(existsLockingSQL, q.Table, q.Key),
	}
}
