package pessimisticmysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

const (
	getLockWaitTimeout = "SELECT @@SESSION.innodb_lock_wait_timeout"
	setLockWaitTimeout = "SET SESSION innodb_lock_wait_timeout = ?"
)

// connSource hands out dedicated connections: *sql.DB.
type connSource interface {
	Conn(ctx context.Context) (*sql.Conn, error)
}

var _ connSource = (*sql.DB)(nil)

// InTx runs fn in a MariaDB/MySQL transaction and commits it if fn returns
// nil. It rolls back if fn returns an error or panics (the panic is
// re-raised after the rollback).
//
// On a Beginner (*sql.DB, *sql.Conn) InTx begins and owns the transaction,
// and runs the whole transaction again while the error is retryable under
// opts — by default deadlock victims (1213), MariaDB's 1020 (record
// changed since the snapshot) and optimistic.ErrConflict, so a closure
// doing several optimistic compare-and-swap writes is retried as one unit
// — so fn may run several times. Retries go through retry.Do and are
// reported to the observe hooks on ctx.
//
// On a *sql.Tx the caller already opened, InTx runs fn once inside it: no
// retry, no commit, no rollback — the caller's own loop (an outer InTx)
// owns them and receives fn's error (ErrConflict, ErrDeadlock, …) so that
// it can retry; a panic propagates to the caller. opts.Isolation and
// opts.LockTimeout must then be zero (the level is set, and the session
// variable could not be restored reliably on a connection InTx does not
// own: use Lock{Wait: WaitTimeout} on the statements instead).
//
// opts.LockTimeout sets the session variable innodb_lock_wait_timeout
// (whole seconds, rounded up, at least 1, at most 100000000). MySQL has no
// transaction-scoped form of it (SET STATEMENT and SET_VAR cover one
// statement, not the caller's fn), so InTx runs each attempt on a
// connection of its own — db.Conn for a *sql.DB, or db itself when it is a
// *sql.Conn — sets the variable before BEGIN, and restores the previous
// value after COMMIT or ROLLBACK, whichever way the transaction ended
// (error, panic, or ctx ending while fn runs, when database/sql rolls back
// by itself). If the restore fails, the connection is discarded
// (database/sql closes it; a caller's *sql.Conn is then closed too) rather
// than handed to the next user with the transaction's timeout. With a
// LockTimeout, db must therefore be a *sql.DB, a *sql.Conn or another
// Beginner with a Conn(ctx) (*sql.Conn, error) method.
//
// Errors: concurkit.ErrInvalidArgument (nil db or fn, bad opts, a db that
// is neither a Beginner nor a *sql.Tx, LockTimeout on a handle without
// its own connections); the error of fn or COMMIT mapped to ErrDeadlock
// (1213), ErrSerialization (MariaDB 1020), ErrLockTimeout (1205),
// ErrLockNotAvailable (MySQL 8 3572) — note that MariaDB reports NOWAIT as
// 1205, which is indistinguishable from a timeout here: LockRows and
// MapError know the statement's policy and map it to ErrLockNotAvailable;
// *concurkit.AmbiguousCommitError (matching concurkit.ErrOutcomeUnknown)
// when COMMIT was sent and its outcome is unknown, never retried;
// *retry.ExhaustedError when retries ran out; an error matching ctx.Err()
// when ctx ends.
func InTx(ctx context.Context, db DBTX, opts *pessimistic.Options, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := txn.Args(pkg, db, fn); err != nil {
		return err
	}
	o, err := txn.Resolve(pkg, opts)
	if err != nil {
		return err
	}
	mapErr := func(ctx context.Context, err error) error { return mapError(ctx, err, txn.UnknownWait) }
	var b Beginner
	switch h := db.(type) {
	case *sql.Tx:
		switch {
		case o.Isolation != sql.LevelDefault:
			return invalid("Isolation %v in a transaction the caller opened: its level is already set", o.Isolation)
		case o.LockTimeout != 0:
			return invalid("LockTimeout in a transaction the caller opened: the session variable could not be restored reliably (use Lock{Wait: WaitTimeout})")
		}
		return mapErr(ctx, fn(ctx, h))
	case Beginner:
		b = h
	default:
		return invalid("%T is neither a Beginner (*sql.DB, *sql.Conn) nor a *sql.Tx", db)
	}
	txo := &sql.TxOptions{Isolation: o.Isolation}
	begin := func(ctx context.Context) (*myTx, error) {
		tx, err := b.BeginTx(ctx, txo)
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
		secs := txn.CeilUnits(o.LockTimeout, time.Second, maxLockWaitTimeout)
		begin = func(ctx context.Context) (*myTx, error) {
			c, owned, err := conn(ctx)
			if err != nil {
				return nil, err
			}
			return beginWithLockWaitTimeout(ctx, c, owned, txo, secs)
		}
	}
	return txn.Run(ctx, o, begin, func(ctx context.Context, t *myTx) error { return fn(ctx, t.Tx) }, mapErr)
}

// InTxValue is InTx for a closure that returns a value: it returns fn's
// value from the attempt that committed (or, in a caller's transaction,
// from the one run), and the zero T with any error. Everything else,
// retries and errors included, is InTx's.
func InTxValue[T any](ctx context.Context, db DBTX, opts *pessimistic.Options, fn func(ctx context.Context, tx *sql.Tx) (T, error)) (T, error) {
	var out, zero T
	if fn == nil {
		return zero, invalid("nil function")
	}
	err := InTx(ctx, db, opts, func(ctx context.Context, tx *sql.Tx) error {
		v, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		out = v
		return nil
	})
	if err != nil {
		return zero, err
	}
	return out, nil
}

// beginWithLockWaitTimeout sets innodb_lock_wait_timeout on conn to secs,
// remembering the old value, and begins a transaction. On error it has
// cleaned up (restored, and given back an owned conn).
func beginWithLockWaitTimeout(ctx context.Context, conn *sql.Conn, owned bool, txo *sql.TxOptions, secs int64) (*myTx, error) {
	t := &myTx{conn: conn, owned: owned}
	if err := conn.QueryRowContext(ctx, getLockWaitTimeout).Scan(&t.restore); err != nil {
		t.close()
		return nil, err
	}
	t.restoring = true // from here on the session may have the new value
	if _, err := conn.ExecContext(ctx, setLockWaitTimeout, secs); err != nil {
		t.End(ctx)
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, txo)
	if err != nil {
		t.End(ctx)
		return nil, err
	}
	t.Tx = tx
	return t, nil
}

// myTx adapts *sql.Tx to the core loop. With a lock timeout, conn is the
// connection the transaction runs on, whose innodb_lock_wait_timeout End
// restores; owned says InTx took it from the pool and gives it back.
type myTx struct {
	*sql.Tx
	conn      *sql.Conn
	owned     bool
	restoring bool
	restore   int64
}

var _ txn.Tx = (*myTx)(nil)

func (t *myTx) Commit(context.Context) error { return t.Tx.Commit() }
func (t *myTx) Rollback(context.Context)     { _ = t.Tx.Rollback() }

// End restores the session's innodb_lock_wait_timeout once the transaction
// is over. database/sql may still be rolling back on its own (ctx ended):
// the restore then waits for the connection, and a session variable does
// not depend on the transaction's outcome anyway.
func (t *myTx) End(ctx context.Context) {
	if t.conn == nil {
		return
	}
	if t.restoring {
		rctx, cancel := txn.CleanupContext(ctx)
		defer cancel()
		if _, err := t.conn.ExecContext(rctx, setLockWaitTimeout, t.restore); err != nil {
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

func (*myTx) CommitError(_ context.Context, err error) error {
	var myErr *mysql.MySQLError
	switch {
	case errors.As(err, &myErr), errors.Is(err, sql.ErrTxDone), errors.Is(err, driver.ErrBadConn):
		// The server answered; or the transaction was already rolled back
		// (its context ended); or, by database/sql's contract for
		// ErrBadConn, nothing was sent: not committed.
		return err
	}
	return &concurkit.AmbiguousCommitError{Err: err}
}
