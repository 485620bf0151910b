package pessimisticpg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

// PostgreSQL advisory-lock statements. Keys are bigint;
// pessimistic.AdvisoryKey maps names to keys.
const (
	advisoryXactLock    = "SELECT pg_advisory_xact_lock($1)"
	tryAdvisoryXactLock = "SELECT pg_try_advisory_xact_lock($1)"
	advisoryLock        = "SELECT pg_advisory_lock($1)"
	tryAdvisoryLock     = "SELECT pg_try_advisory_lock($1)"
	advisoryUnlock      = "SELECT pg_advisory_unlock($1)"
)

// AdvisoryXactLock takes the exclusive transaction-level advisory lock key
// (pg_advisory_xact_lock), waiting while another session holds it. The lock
// is released when tx commits or rolls back; there is no unlock. Taking it
// again in the same transaction succeeds at once. A wait that ends by
// lock_timeout or ctx is reported to the observe hooks on ctx
// (Hooks.LockWait, Key the decimal key).
//
// Errors: concurkit.ErrInvalidArgument (nil tx); ErrLockTimeout when
// lock_timeout expires; ErrDeadlock; an error matching ctx.Err() (not
// ErrLockTimeout) when ctx ends during the wait.
func AdvisoryXactLock(ctx context.Context, tx DBTX, key int64) error {
	if handle.IsNil(tx) {
		return invalid("nil transaction")
	}
	start := time.Now()
	if _, err := tx.Exec(ctx, advisoryXactLock, key); err != nil {
		err = mapError(ctx, err, pessimistic.Wait, false)
		txn.AdvisoryWait(ctx, pkg, key, start, err)
		return err
	}
	return nil
}

// TryAdvisoryXactLock takes the transaction-level advisory lock key without
// waiting (pg_try_advisory_xact_lock). It returns nil when the lock is now
// held by tx's transaction, ErrLockNotAvailable when another session holds
// it (reported to Hooks.LockWait), concurkit.ErrInvalidArgument for a nil
// tx, or the driver error.
func TryAdvisoryXactLock(ctx context.Context, tx DBTX, key int64) error {
	if handle.IsNil(tx) {
		return invalid("nil transaction")
	}
	start := time.Now()
	var ok bool
	err := tx.QueryRow(ctx, tryAdvisoryXactLock, key).Scan(&ok)
	switch {
	case err != nil:
		err = mapError(ctx, err, pessimistic.NoWait, false)
	case !ok:
		err = pessimistic.ErrLockNotAvailable
	}
	txn.AdvisoryWait(ctx, pkg, key, start, err)
	return err
}

// SessionLock is a held session-level advisory lock, returned by
// AdvisoryLock and TryAdvisoryLock. It stays held until Release, or until
// the connection closes; a transaction's end does not release it.
type SessionLock struct {
	conn *pgx.Conn
	key  int64
	once sync.Once
	err  error
}

// Key returns the advisory lock key.
func (l *SessionLock) Key() int64 { return l.key }

// releaseTimeout bounds SessionLock.Release's unlock; closeTimeout bounds
// closing the connection when the unlock could not be confirmed.
const (
	releaseTimeout = 5 * time.Second
	closeTimeout   = time.Second
)

// Release unlocks the advisory lock (pg_advisory_unlock) on the connection
// that took it. Only the first call does anything; later calls return the
// first call's result.
//
// The unlock is sent even when ctx is already cancelled (on
// context.WithoutCancel(ctx)): a skipped unlock would leave the lock held
// by a session that may go back to a pool, where the next borrower would
// silently hold it too (advisory locks are re-entrant per session). The
// unlock is bounded by ctx's deadline when ctx is still live, and by 5 s in
// any case. If the server does not confirm the unlock (an error, a
// timeout, a broken connection, a failed transaction open on the
// connection), Release closes the connection, which ends the session and
// frees every lock it held, and returns an error wrapping the cause: the
// connection is then unusable (a pgxpool connection is destroyed when it
// is released back to the pool). It returns nil once the unlock is
// confirmed, pessimistic.ErrNotHeld if the server says the session did not
// hold the lock (the connection stays open), and
// concurkit.ErrInvalidArgument for a nil or zero SessionLock.
func (l *SessionLock) Release(ctx context.Context) error {
	if l == nil || l.conn == nil {
		return invalid("Release of a nil or zero SessionLock")
	}
	l.once.Do(func() { l.err = l.release(ctx) })
	return l.err
}

func (l *SessionLock) release(ctx context.Context) error {
	uctx := ctx
	if ctx.Err() != nil {
		uctx = context.WithoutCancel(ctx)
	}
	uctx, cancel := context.WithTimeout(uctx, releaseTimeout)
	defer cancel()
	var ok bool
	err := l.conn.QueryRow(uctx, advisoryUnlock, l.key).Scan(&ok)
	if err == nil {
		if !ok {
			return pessimistic.ErrNotHeld
		}
		return nil
	}
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer ccancel()
	_ = l.conn.Close(cctx) // always closes the socket, whatever it returns
	return fmt.Errorf("pessimisticpg: advisory unlock not confirmed, connection closed (which frees the lock): %w", err)
}

// AdvisoryLock takes the exclusive session-level advisory lock key on conn
// (pg_advisory_lock), waiting while another session holds it, and returns
// a handle whose Release unlocks it. Session locks belong to the
// connection, so conn must be one dedicated connection (from a pool:
// c, _ := pool.Acquire(ctx); AdvisoryLock(ctx, c.Conn(), key)), which must
// not go back to the pool before Release. The lock is re-entrant: the same
// session can take it again, and must release it as many times. A wait
// that ends by lock_timeout or ctx is reported to the observe hooks on ctx
// (Hooks.LockWait, Key the decimal key).
//
// Errors: concurkit.ErrInvalidArgument (nil conn); ErrLockTimeout when
// lock_timeout expires; ErrDeadlock; an error matching ctx.Err() (not
// ErrLockTimeout) when ctx ends during the wait (pgx then closes the
// connection, which frees anything the session held).
func AdvisoryLock(ctx context.Context, conn *pgx.Conn, key int64) (*SessionLock, error) {
	if conn == nil {
		return nil, invalid("nil connection")
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, advisoryLock, key); err != nil {
		err = mapError(ctx, err, pessimistic.Wait, false)
		txn.AdvisoryWait(ctx, pkg, key, start, err)
		return nil, err
	}
	return &SessionLock{conn: conn, key: key}, nil
}

// TryAdvisoryLock takes the session-level advisory lock key on conn without
// waiting (pg_try_advisory_lock). It returns the handle, or
// ErrLockNotAvailable when another session holds the lock (reported to
// Hooks.LockWait), concurkit.ErrInvalidArgument for a nil conn, or the
// driver error. See AdvisoryLock for the rules on conn.
func TryAdvisoryLock(ctx context.Context, conn *pgx.Conn, key int64) (*SessionLock, error) {
	if conn == nil {
		return nil, invalid("nil connection")
	}
	start := time.Now()
	var ok bool
	err := conn.QueryRow(ctx, tryAdvisoryLock, key).Scan(&ok)
	switch {
	case err != nil:
		err = mapError(ctx, err, pessimistic.NoWait, false)
	case !ok:
		err = pessimistic.ErrLockNotAvailable
	}
	if err != nil {
		txn.AdvisoryWait(ctx, pkg, key, start, err)
		return nil, err
	}
	return &SessionLock{conn: conn, key: key}, nil
}
