package pessimistic

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/sqldb"
)

// SQLDBTX is the database/sql query interface: *sql.DB, *sql.Conn and
// *sql.Tx satisfy it. The MySQL helpers generate MariaDB 10.11 / MySQL 8
// syntax (github.com/go-sql-driver/mysql); row locks last until the end of
// the transaction, so pass a *sql.Tx.
type SQLDBTX = sqldb.DBTX

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

// connSource hands out dedicated connections: *sql.DB.
type connSource interface {
	Conn(ctx context.Context) (*sql.Conn, error)
}

var _ connSource = (*sql.DB)(nil)

// InTxMySQL is InTx for MariaDB/MySQL through database/sql: it runs fn in a
// transaction begun on db, commits if fn returns nil, rolls back on error or
// panic (re-raising the panic), and runs the whole transaction again while
// the error is retryable under opts (by default deadlock victims, 1213, and
// MariaDB's 1020). fn may therefore run several times.
//
// opts.LockTimeout sets the session variable innodb_lock_wait_timeout
// (whole seconds, rounded up, at least 1, at most 100000000). MySQL has no
// transaction-scoped form of it (SET STATEMENT and SET_VAR cover one
// statement, not the caller's fn), so InTxMySQL runs each attempt on a
// connection of its own — db.Conn for a *sql.DB, or db itself when it is a
// *sql.Conn — sets the variable before BEGIN, and restores the previous
// value after COMMIT or ROLLBACK, whichever way the transaction ended
// (error, panic, or ctx ending while fn runs, when database/sql rolls back
// by itself). If the restore fails, the connection is discarded
// (database/sql closes it; a caller's *sql.Conn is then closed too) rather
// than handed to the next user with the transaction's timeout. With a
// LockTimeout, db must therefore be a *sql.DB, a *sql.Conn or another
// SQLBeginner with a Conn(ctx) (*sql.Conn, error) method; other handles are
// ErrInvalidArgument.
//
// Errors: ErrInvalidArgument (nil db or fn, bad opts); the error of fn or
// COMMIT mapped to ErrDeadlock (1213), ErrSerialization (MariaDB 1020),
// ErrLockTimeout (1205), ErrLockNotAvailable (MySQL 8 3572); note that
// MariaDB reports NOWAIT as 1205, which is indistinguishable from a timeout
// here — LockRowsMySQL and Lock.MapError know the statement's policy and
// map it to ErrLockNotAvailable; *AmbiguousCommitError when COMMIT was sent
// and its outcome is unknown; *retry.ExhaustedError when retries ran out;
// an error matching ctx.Err() when ctx ends.
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
		return &myTx{Tx: tx}, nil
	}
	if o.LockTimeout > 0 {
		// conn returns the connection of one attempt and whether it was
		// taken from a pool (and must be given back).
		var conn func(ctx context.Context) (*sql.Conn, bool, error)
		switch h := db.(type) {
		case *sql.Conn:
			conn = func(context.Context) (*sql.Conn, bool, error) { return h, false, nil }
		case connSource:
			conn = func(ctx context.Context) (*sql.Conn, bool, error) {
				c, err := h.Conn(ctx)
				return c, true, err
			}
		default:
			return invalid("LockTimeout needs a *sql.DB or *sql.Conn (a connection whose session setting can be restored), got %T", db)
		}
		secs := ceilUnits(o.LockTimeout, time.Second, myMaxLockWaitTimeout)
		begin = func(ctx context.Context) (*myTx, error) {
			c, owned, err := conn(ctx)
			if err != nil {
				return nil, err
			}
			return beginWithLockWaitTimeout(ctx, c, owned, txo, secs)
		}
	}
	return inTx(ctx, o, begin, func(ctx context.Context, t *myTx) error { return fn(ctx, t.Tx) })
}

// beginWithLockWaitTimeout sets innodb_lock_wait_timeout on conn to secs,
// remembering the old value, and begins a transaction. On error it has
// cleaned up (restored, and given back an owned conn).
func beginWithLockWaitTimeout(ctx context.Context, conn *sql.Conn, owned bool, txo *sql.TxOptions, secs int64) (*myTx, error) {
	t := &myTx{conn: conn, owned: owned}
	if err := conn.QueryRowContext(ctx, myGetLockWaitTimeout).Scan(&t.restore); err != nil {
		t.close()
		return nil, err
	}
	t.restoring = true // from here on the session may have the new value
	if _, err := conn.ExecContext(ctx, mySetLockWaitTimeout, secs); err != nil {
		t.end(ctx)
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, txo)
	if err != nil {
		t.end(ctx)
		return nil, err
	}
	t.Tx = tx
	return t, nil
}

// myTx adapts *sql.Tx to the core loop. With a lock timeout, conn is the
// connection the transaction runs on, whose innodb_lock_wait_timeout end
// restores; owned says InTxMySQL took it from the pool and gives it back.
type myTx struct {
	*sql.Tx
	conn      *sql.Conn
	owned     bool
	restoring bool
	restore   int64
}

func (t *myTx) commit(context.Context) error { return t.Commit() }
func (t *myTx) rollback(context.Context)     { _ = t.Rollback() }

// end restores the session's innodb_lock_wait_timeout once the transaction
// is over. database/sql may still be rolling back on its own (ctx ended):
// the restore then waits for the connection, and a session variable does
// not depend on the transaction's outcome anyway.
func (t *myTx) end(ctx context.Context) {
	if t.conn == nil {
		return
	}
	if t.restoring {
		rctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, err := t.conn.ExecContext(rctx, mySetLockWaitTimeout, t.restore); err != nil {
			// The session may keep the transaction's timeout: make
			// database/sql close the connection instead of reusing it.
			_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	t.close()
}

// close gives an owned connection back to the pool.
func (t *myTx) close() {
	if t.owned {
		_ = t.conn.Close()
	}
	t.conn = nil
}

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
// Under REPEATABLE READ (MariaDB's default) the lock does not refresh the
// transaction's snapshot: a plain SELECT after LockRowsMySQL reads the
// snapshot taken at the transaction's first consistent read, so if any
// plain read ran before the lock, the values read after it may be stale
// and writing them back loses updates (MariaDB ≥ 11.6 fails the lock with
// 1020 → ErrSerialization instead). Lock before any other read in the
// transaction, read the values with a locking read (the Lock's clause on
// your own SELECT), or use READ COMMITTED. PostgreSQL has no such gap:
// there, locking a row changed after the snapshot is ErrSerialization.
//
// Errors: ErrInvalidArgument (nil tx, bad identifier, invalid lock);
// ErrLockNotAvailable (NoWait and a row is locked: MariaDB 1205, MySQL
// 3572); ErrLockTimeout (1205 under Wait or WaitTimeout); ErrDeadlock;
// ErrSerialization (MariaDB 1020); each wrapping the driver error; an
// error matching ctx.Err() (and not ErrLockTimeout) when ctx ends during
// the wait.
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
		return nil, mapError(ctx, err, SkipLocked, false)
	}
	args := make([]any, 0, 2+len(jobs))
	args = append(args, c.claimed, c.worker)
	for _, j := range jobs {
		args = append(args, j.ID)
	}
	q := fmt.Sprintf(myClaimUpdate, c.table, c.id, c.state, c.by, c.at, placeholders(len(jobs)))
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return nil, mapError(ctx, err, SkipLocked, false)
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
