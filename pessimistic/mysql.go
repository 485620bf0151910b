package pessimistic

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/dbtx"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
)

// SQLDBTX is the database/sql query interface: *sql.DB, *sql.Conn and
// *sql.Tx satisfy it. The MySQL helpers generate MariaDB 10.11 / MySQL 8
// syntax (github.com/go-sql-driver/mysql); row locks last until the end of
// the transaction, so pass a *sql.Tx.
type SQLDBTX = dbtx.SQL

// SQLBeginner starts database/sql transactions: *sql.DB and *sql.Conn
// satisfy it.
type SQLBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

var (
	_ SQLBeginner = (*sql.DB)(nil)
	_ SQLBeginner = (*sql.Conn)(nil)
)

const (
	myGetLockWaitTimeout = "SELECT @@SESSION.innodb_lock_wait_timeout"
	mySetLockWaitTimeout = "SET SESSION innodb_lock_wait_timeout = ?"
)

// maxPlaceholders is the MySQL protocol's limit of bind parameters per
// statement.
const maxPlaceholders = 65535

// InTxMySQL is InTx for MariaDB/MySQL through database/sql: it runs fn in a
// transaction begun on db, commits if fn returns nil, rolls back on error or
// panic (re-raising the panic), and runs the whole transaction again while
// the error is retryable under opts (by default deadlock victims, 1213).
// fn may therefore run several times.
//
// opts.LockTimeout sets the session's innodb_lock_wait_timeout (whole
// seconds, rounded up) after BEGIN and restores the previous value before
// COMMIT or ROLLBACK.
//
// Errors: ErrInvalidArgument (nil db or fn, bad opts); the error of fn or
// COMMIT mapped to ErrDeadlock (1213), ErrLockTimeout (1205),
// ErrLockNotAvailable (MySQL 8 3572); note that MariaDB reports NOWAIT as
// 1205, which is indistinguishable from a timeout here — LockRowsMySQL and
// Lock.MapError know the statement's policy and map it to
// ErrLockNotAvailable; *AmbiguousCommitError when COMMIT was sent and its
// outcome is unknown; *retry.ExhaustedError when retries ran out; ctx.Err()
// joined with the last error when ctx ends.
func InTxMySQL(ctx context.Context, db SQLBeginner, opts *Options, fn func(ctx context.Context, tx *sql.Tx) error) error {
	o, err := txArgs(db, fn, opts)
	if err != nil {
		return err
	}
	txo := &sql.TxOptions{Isolation: o.Isolation}
	begin := func(ctx context.Context) (*myTx, error) {
		tx, err := db.BeginTx(ctx, txo)
		if err != nil {
			return nil, err
		}
		t := &myTx{Tx: tx}
		if o.LockTimeout > 0 {
			var old int64
			err := tx.QueryRowContext(ctx, myGetLockWaitTimeout).Scan(&old)
			if err == nil {
				_, err = tx.ExecContext(ctx, mySetLockWaitTimeout, ceilSeconds(o.LockTimeout))
			}
			if err != nil {
				_ = tx.Rollback()
				return nil, err
			}
			t.restore = &old
		}
		return t, nil
	}
	return inTx(ctx, o, begin, func(ctx context.Context, t *myTx) error { return fn(ctx, t.Tx) })
}

// myTx adapts *sql.Tx to the core loop; restore is the session's
// innodb_lock_wait_timeout to put back before the transaction ends.
type myTx struct {
	*sql.Tx
	restore *int64
}

func (t *myTx) finish(ctx context.Context) error {
	if t.restore == nil {
		return nil
	}
	old := *t.restore
	t.restore = nil
	_, err := t.ExecContext(ctx, mySetLockWaitTimeout, old)
	return err
}

func (t *myTx) commit(context.Context) error { return t.Commit() }
func (t *myTx) rollback(context.Context)     { _ = t.Rollback() }
func (*myTx) commitError(_ context.Context, err error) error {
	var myErr *mysql.MySQLError
	switch {
	case errors.As(err, &myErr), errors.Is(err, sql.ErrTxDone), errors.Is(err, driver.ErrBadConn):
		// The server answered; or the transaction was already rolled back
		// (its context ended); or, by database/sql's contract for
		// ErrBadConn, nothing was sent: not committed.
		return err
	}
	return &AmbiguousCommitError{Err: err}
}

var _ txn = (*myTx)(nil)

const myLockRows = "SELECT %[2]s FROM %[1]s WHERE %[2]s IN (%[3]s) ORDER BY %[2]s%[4]s"

// LockRowsMySQL is LockRows for MariaDB/MySQL: it locks the rows of table
// whose column equals one of keys in ascending key order and returns the
// keys it locked. ForNoKeyUpdate is taken as FOR UPDATE, ForShare as LOCK IN
// SHARE MODE, WaitTimeout as WAIT n (MariaDB; whole seconds, rounded up).
// Empty keys lock nothing and return (nil, nil); more than 65535 keys is
// ErrInvalidArgument.
//
// Errors: ErrInvalidArgument (nil tx, bad identifier, invalid lock);
// ErrLockNotAvailable (NoWait and a row is locked: MariaDB 1205, MySQL
// 3572); ErrLockTimeout (1205 under Wait or WaitTimeout, or ctx ended during
// the wait: then joined with ctx.Err()); ErrDeadlock; each wrapping the
// driver error.
func LockRowsMySQL[K Key](ctx context.Context, tx SQLDBTX, table, column string, keys []K, lock Lock) ([]K, error) {
	t, c, clause, err := rowsTarget(tx, table, column, ident.MySQL, lock.MySQL)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > maxPlaceholders {
		return nil, invalid("%d keys, at most %d per call", len(keys), maxPlaceholders)
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	q := fmt.Sprintf(myLockRows, t, c, placeholders(len(keys)), clause)
	got, err := queryColumn[K](ctx, tx, q, args...)
	if err != nil {
		return nil, lock.MapError(ctx, err)
	}
	return got, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// queryColumn returns the distinct adjacent values of a one-column query.
func queryColumn[K Key](ctx context.Context, tx SQLDBTX, q string, args ...any) ([]K, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []K
	for rows.Next() {
		var k K
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
	return out, rows.Err()
}

const (
	myClaimSelect = "SELECT %[2]s, %[3]s FROM %[1]s WHERE %[4]s = ? ORDER BY %[2]s LIMIT ? FOR UPDATE SKIP LOCKED"
	myClaimUpdate = "UPDATE %[1]s SET %[3]s = ?, %[4]s = ?, %[5]s = NOW(6) WHERE %[2]s IN (%[6]s)"
)

// ClaimJobsMySQL is ClaimJobs for MariaDB/MySQL: in tx it selects up to n
// pending jobs in id order FOR UPDATE SKIP LOCKED, then marks them claimed
// (state, worker, NOW(6)) with a second statement, and returns them in id
// order. Concurrent workers get disjoint jobs. The claim is made durable by
// committing tx.
//
// Errors: ErrInvalidArgument (nil tx, n <= 0, bad identifier, pending ==
// claimed); ErrDeadlock; ctx errors; each wrapping the driver error.
func ClaimJobsMySQL(ctx context.Context, tx SQLDBTX, table string, n int, opts *ClaimOptions) ([]Job, error) {
	if handle.IsNil(tx) {
		return nil, invalid("nil transaction")
	}
	c, err := opts.build(table, n, ident.MySQL)
	if err != nil {
		return nil, err
	}
	if n > maxPlaceholders-2 {
		n = maxPlaceholders - 2
	}
	jobs, err := claimSelectMySQL(ctx, tx, fmt.Sprintf(myClaimSelect, c.table, c.id, c.payload, c.state), c.pending, n)
	if err != nil || len(jobs) == 0 {
		return nil, mapError(ctx, err, SkipLocked, false, false)
	}
	args := make([]any, 0, 2+len(jobs))
	args = append(args, c.claimed, c.worker)
	for _, j := range jobs {
		args = append(args, j.ID)
	}
	q := fmt.Sprintf(myClaimUpdate, c.table, c.id, c.state, c.by, c.at, placeholders(len(jobs)))
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return nil, mapError(ctx, err, SkipLocked, false, false)
	}
	return jobs, nil
}

func claimSelectMySQL(ctx context.Context, tx SQLDBTX, q, pending string, n int) ([]Job, error) {
	rows, err := tx.QueryContext(ctx, q, pending, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		var j Job
		if err := rows.Scan(&j.ID, &j.Payload); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}
