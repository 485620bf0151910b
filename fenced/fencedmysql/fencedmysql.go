package fencedmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
	"github.com/concurkit/concurkit/internal/galera"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/retry"
)

// DBTX is the part of a database/sql *DB, *Conn or *Tx that the package
// uses. It is the same interface as every other concurkit database/sql
// adapter's DBTX.
type DBTX = sqldb.DBTX

var (
	_ DBTX = (*sql.DB)(nil)
	_ DBTX = (*sql.Conn)(nil)
	_ DBTX = (*sql.Tx)(nil)
)

const pkg = "fencedmysql"

// SQL templates; %[n]s are quoted identifiers, never values.
const (
	// myUpsert: on a duplicate key every assignment is guarded by
	// IF(token <= new token, new, old). The token column is assigned
	// last, so every guard reads the old token whatever the sql_mode:
	// MySQL evaluates assignments left to right (later ones see earlier
	// results), MariaDB's SIMULTANEOUS_ASSIGNMENT on the old row
	// (TestSimultaneousAssignment). %[4]s/%[5]s list the version column
	// (value 1) and the assigned columns, %[6]s their guarded updates.
	myUpsert = "INSERT INTO %[1]s (%[2]s, %[3]s%[4]s) VALUES (?, ?%[5]s) ON DUPLICATE KEY UPDATE %[6]s%[3]s = IF(%[3]s <= VALUES(%[3]s), VALUES(%[3]s), %[3]s)"
	// myUpdate: %[4]s holds the assignments and the version increment;
	// the arguments are the values, token, key, token.
	myUpdate = "UPDATE %[1]s SET %[4]s%[3]s = ? WHERE %[2]s = ? AND %[3]s <= ?"
	// myReadToken must be a locking (current) read: the guarded statement
	// compared the token with the newest committed row, and so must the
	// read that interprets its outcome. A plain SELECT inside a REPEATABLE
	// READ transaction reads the transaction's snapshot, which can still
	// show the caller's own older token after a successor committed a
	// higher one: "unchanged, token equal" would then report a refused
	// write as accepted.
	myReadToken = "SELECT %[3]s FROM %[1]s WHERE %[2]s = ? LOCK IN SHARE MODE"
	// myTouchDown and myTouchUp lower the token by one and raise it back,
	// in the caller's transaction, on a Galera node only: see
	// confirmInTx. The token is at least 1, so neither overflows, even in
	// an UNSIGNED column. Arguments: key, token; key.
	myTouchDown = "UPDATE %[1]s SET %[3]s = %[3]s - 1 WHERE %[2]s = ? AND %[3]s = ?"
	myTouchUp   = "UPDATE %[1]s SET %[3]s = %[3]s + 1 WHERE %[2]s = ?"
)

// Built statements, per (Table, assigned columns).
var writes, updates guard.Cache

// Write is fencedpg.Write for MySQL/MariaDB (INSERT … ON DUPLICATE KEY
// UPDATE with every assignment guarded by IF()), with the same arguments
// and results; with t.VersionColumn set an accepted write also increments
// the version (an inserted row gets 1).
//
// MySQL's affected-row count tells an accepted update (2) apart, but not
// an insert from a refused write under clientFoundRows (both 1), nor a
// refused write from an equal token rewriting identical values (both 0).
// In those cases a second query, a locking read that sees the newest
// committed row even inside an older REPEATABLE READ snapshot, reads the
// row's token: equal means the write was accepted, higher means
// fenced.ErrStaleToken (reported to observe.Hooks.FenceRejected with the
// token seen). The stored token never decreases, so a refused write is
// never reported as accepted; an insert overtaken by a successor between
// the two queries is reported as fenced.ErrStaleToken, which is what it
// effectively is. An accepted update of an existing row is one round trip.
//
// Cancellation: given a *sql.DB (autocommit), a statement still running
// when ctx ends — typically queued behind a row lock — is stopped on the
// server (KILL QUERY from another pooled connection) before Write returns,
// so a cancelled write did not happen; if that cannot be confirmed within a
// few seconds the error is a *concurkit.AmbiguousCommitError. In a *sql.Tx
// the driver drops the connection and the server rolls the transaction
// back, so the write can never commit. On a *sql.Conn a call cut short by
// ctx returns *concurkit.AmbiguousCommitError (no second connection to stop
// the statement from). The error matches ctx.Err() in every case.
//
// Given a *sql.DB, a statement rolled back as a deadlock victim or, on
// Galera, by a certification failure (1213: nothing was written) is run
// again under retry's default policy; in a transaction the 1213 is
// returned, for the caller's loop to run the transaction again. See the
// package documentation for Galera.
func Write(ctx context.Context, db DBTX, t fenced.Table, key any, token fenced.Token, set map[string]any) error {
	st, err := prepare(&writes, buildWrite, db, t, key, token, set)
	if err != nil {
		return err
	}
	return write(ctx, db, st, key, token, set, st.Resource)
}

func write(ctx context.Context, db DBTX, st *guard.Stmt, key any, token fenced.Token, set map[string]any, resource string) error {
	res, err := exec(ctx, db, st.SQL, st.Args(set, []any{key, int64(token)}))
	if err != nil {
		return guard.DriverError(ctx, pkg, "guarded write "+st.Resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return guard.DriverError(ctx, pkg, "guarded write "+st.Resource, err)
	}
	if n == 2 { // an existing row was updated: the guard passed
		return nil
	}
	// 1 is an insert, or (with clientFoundRows) a row left unchanged by a
	// false guard; 0 is a row left unchanged without clientFoundRows.
	return checkUnchanged(ctx, db, st, key, token, resource)
}

// Update is fencedpg.Update for MySQL/MariaDB, with the same arguments and
// results. As with Write, a write that changed nothing costs a second
// query (a locking read), an accepted one is one round trip, and
// cancellation stops the statement on the server or reports
// *concurkit.AmbiguousCommitError. As with fencedpg.Update, read a row
// whose new values derive from it with SELECT … FOR UPDATE in the same
// transaction.
func Update(ctx context.Context, db DBTX, t fenced.Table, key any, token fenced.Token, set map[string]any) error {
	st, err := prepare(&updates, buildUpdate, db, t, key, token, set)
	if err != nil {
		return err
	}
	res, err := exec(ctx, db, st.SQL, st.Args(set, nil, int64(token), key, int64(token)))
	if err != nil {
		return guard.DriverError(ctx, pkg, "guarded update "+st.Resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return guard.DriverError(ctx, pkg, "guarded update "+st.Resource, err)
	}
	if n > 0 {
		return nil
	}
	return checkUnchanged(ctx, db, st, key, token, st.Resource)
}

// exec runs a guarded statement. On a *sql.DB the statement is a
// transaction of its own (autocommit), and one that the server rolled back
// as a deadlock victim or, on Galera, because a write set of another node
// touching the row was certified first (1213, a definite failure: nothing
// was written) is run again under retry's default policy; the guard then
// compares the token with the row as the winner left it. Elsewhere the
// statement belongs to the caller's transaction, which the 1213 rolled
// back whole: the caller's loop (pessimisticmysql.InTx) retries it.
func exec(ctx context.Context, db DBTX, query string, args []any) (sql.Result, error) {
	res, err := mysqlcancel.Exec(ctx, db, query, args...)
	if _, auto := db.(*sql.DB); !auto || err == nil || !retry.IsRetryable(err) {
		return res, err
	}
	err = retry.Do(ctx, retry.Policy{}, func(ctx context.Context) error {
		res, err = mysqlcancel.Exec(ctx, db, query, args...)
		return err
	})
	return res, err
}

func checkUnchanged(ctx context.Context, db DBTX, st *guard.Stmt, key any, token fenced.Token, resource string) error {
	_, inTx := db.(*sql.Tx)
	stored, err := readToken(ctx, db, st, key, !inTx)
	if err == nil && stored == token && inTx {
		err = confirmInTx(ctx, db, st, key, token)
	}
	if err != nil {
		return err
	}
	return guard.StaleOrSame(ctx, pkg, resource, stored, token)
}

// readToken reads the row's token back (st.Read). In a transaction the
// read runs on the connection of the write. Outside one (causal) it may
// run on another connection — on Galera, on another node, which may not
// have applied the write yet, nor a higher token committed elsewhere — so
// it waits first until its node has applied what the cluster committed
// before it (wsrep_sync_wait, galera.MaybeCausal; on a MariaDB built
// without wsrep, which refuses the variable, the plain read). On a
// *sql.DB a read that a deadlock or, on Galera, the applier of another
// node's write ended (1213) is run again, as exec does.
func readToken(ctx context.Context, db DBTX, st *guard.Stmt, key any, causal bool) (fenced.Token, error) {
	var stored int64
	query := st.Read
	if causal {
		query = galera.MaybeCausal(st.Read, galera.Read)
	}
	read := func(ctx context.Context) error {
		err := db.QueryRowContext(ctx, query, key).Scan(&stored)
		if causal && galera.UnknownVariable(err) {
			query = st.Read
			err = db.QueryRowContext(ctx, query, key).Scan(&stored)
		}
		return mysqlerr.Mark(err)
	}
	err := read(ctx)
	if _, auto := db.(*sql.DB); auto && err != nil && retry.IsRetryable(err) {
		err = retry.Do(ctx, retry.Policy{}, read)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("%w: %s: key %v", fenced.ErrNotFound, st.Resource, key)
	case err != nil:
		return 0, guard.DriverError(ctx, pkg, "read token after unchanged write of "+st.Resource, err)
	}
	return fenced.Token(stored), nil
}

// confirmInTx is called when a write in a transaction changed nothing and
// the row holds the caller's own token: on a single server the write was
// accepted (the token never decreases, the locking read saw the newest
// row, and it holds the row until COMMIT). On a Galera node it may not
// have been: the node may not yet have applied a higher token committed
// on another node, its lock holds back no other node, and a write that
// changes nothing is not certified. So on Galera (asked only on this
// path), the token is lowered by one and raised back, which changes
// nothing in the end but puts the row in the transaction's write set: if
// a higher token was committed on another node, the caller's COMMIT fails
// with 1213, as it does for any write the newer token overtook, and the
// transaction run again is refused.
func confirmInTx(ctx context.Context, db DBTX, st *guard.Stmt, key any, token fenced.Token) error {
	what := "confirm unchanged write of " + st.Resource
	on, err := galera.On(ctx, db)
	if err != nil {
		return guard.DriverError(ctx, pkg, what, err)
	}
	if !on {
		return nil
	}
	res, err := db.ExecContext(ctx, st.Touch[0], key, int64(token))
	if err != nil {
		return guard.DriverError(ctx, pkg, what, err)
	}
	// The row is locked by this transaction since the write: its token
	// cannot have changed.
	if n, err := res.RowsAffected(); err != nil {
		return guard.DriverError(ctx, pkg, what, err)
	} else if n != 1 {
		return fmt.Errorf("%s: %s: %d rows with key %v and token %d, want 1", pkg, what, n, key, int64(token))
	}
	if _, err := db.ExecContext(ctx, st.Touch[1], key); err != nil {
		return guard.DriverError(ctx, pkg, what, err)
	}
	return nil
}

// prepare checks the arguments and returns the cached statement.
func prepare(c *guard.Cache, build func(fenced.Table, []string) (*guard.Stmt, error), db DBTX, t fenced.Table, key any, token fenced.Token, set map[string]any) (*guard.Stmt, error) {
	if handle.IsNil(db) {
		return nil, guard.Invalid(pkg, "nil db")
	}
	if key == nil {
		return nil, guard.Invalid(pkg, "nil key")
	}
	if err := guard.CheckToken(token); err != nil {
		return nil, err
	}
	return c.Get(t, set, build)
}

func quote(t fenced.Table, cols []string) (guard.Names, guard.Quoted, error) {
	n, err := guard.Resolve(pkg, t, cols)
	if err != nil {
		return n, guard.Quoted{}, err
	}
	q, err := n.Quote(pkg, ident.MySQL)
	return n, q, err
}

func buildWrite(t fenced.Table, cols []string) (*guard.Stmt, error) {
	n, q, err := quote(t, cols)
	if err != nil {
		return nil, err
	}
	var names, params, assign strings.Builder
	if q.Version != "" {
		fmt.Fprintf(&names, ", %s", q.Version)
		params.WriteString(", 1")
	}
	for _, c := range q.Columns {
		fmt.Fprintf(&names, ", %s", c)
		params.WriteString(", ?")
		fmt.Fprintf(&assign, "%[1]s = IF(%[2]s <= VALUES(%[2]s), VALUES(%[1]s), %[1]s), ", c, q.Token)
	}
	if q.Version != "" {
		fmt.Fprintf(&assign, "%[1]s = IF(%[2]s <= VALUES(%[2]s), %[1]s + 1, %[1]s), ", q.Version, q.Token)
	}
	return &guard.Stmt{
		SQL:      fmt.Sprintf(myUpsert, q.Table, q.Key, q.Token, names.String(), params.String(), assign.String()),
		Read:     fmt.Sprintf(myReadToken, q.Table, q.Key, q.Token),
		Columns:  cols,
		Resource: n.Resource(),
		Touch:    touch(q),
	}, nil
}

func buildUpdate(t fenced.Table, cols []string) (*guard.Stmt, error) {
	n, q, err := quote(t, cols)
	if err != nil {
		return nil, err
	}
	var assign strings.Builder
	for _, c := range q.Columns {
		fmt.Fprintf(&assign, "%s = ?, ", c)
	}
	if q.Version != "" {
		fmt.Fprintf(&assign, "%[1]s = %[1]s + 1, ", q.Version)
	}
	return &guard.Stmt{
		SQL:      fmt.Sprintf(myUpdate, q.Table, q.Key, q.Token, assign.String()),
		Read:     fmt.Sprintf(myReadToken, q.Table, q.Key, q.Token),
		Columns:  cols,
		Resource: n.Resource(),
		Touch:    touch(q),
	}, nil
}

func touch(q guard.Quoted) [2]string {
	return [2]string{fmt.Sprintf(myTouchDown, q.Table, q.Key, q.Token), fmt.Sprintf(myTouchUp, q.Table, q.Key, q.Token)}
}
