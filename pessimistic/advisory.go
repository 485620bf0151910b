package pessimistic

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/internal/handle"
)

// PostgreSQL advisory-lock statements. Keys are bigint; AdvisoryKey maps
// names to keys.
const (
	pgAdvisoryXactLock    = "SELECT pg_advisory_xact_lock($1)"
	pgTryAdvisoryXactLock = "SELECT pg_try_advisory_xact_lock($1)"
	pgAdvisoryLock        = "SELECT pg_advisory_lock($1)"
	pgTryAdvisoryLock     = "SELECT pg_try_advisory_lock($1)"
	pgAdvisoryUnlock      = "SELECT pg_advisory_unlock($1)"
)

// AdvisoryXactLock takes the exclusive transaction-level advisory lock key
// (pg_advisory_xact_lock), waiting while another session holds it. The lock
// is released when tx commits or rolls back; there is no unlock. Taking it
// again in the same transaction succeeds at once.
//
// Errors: ErrInvalidArgument (nil tx); ErrLockTimeout when lock_timeout
// expires, or joined with ctx.Err() when ctx ends during the wait;
// ErrDeadlock.
func AdvisoryXactLock(ctx context.Context, tx DBTX, key int64) error {
	if handle.IsNil(tx) {
		return invalid("nil transaction")
	}
	if _, err := tx.Exec(ctx, pgAdvisoryXactLock, key); err != nil {
		return mapError(ctx, err, Wait, false, true)
	}
	return nil
}

// TryAdvisoryXactLock takes the transaction-level advisory lock key without
// waiting (pg_try_advisory_xact_lock). It returns nil when the lock is now
// held by tx's transaction, ErrLockNotAvailable when another session holds
// it, ErrInvalidArgument for a nil tx, or the driver error.
func TryAdvisoryXactLock(ctx context.Context, tx DBTX, key int64) error {
	if handle.IsNil(tx) {
		return invalid("nil transaction")
	}
	var ok bool
	if err := tx.QueryRow(ctx, pgTryAdvisoryXactLock, key).Scan(&ok); err != nil {
		return mapError(ctx, err, NoWait, false, false)
	}
	if !ok {
		return ErrLockNotAvailable
	}
	return nil
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

// Release unlocks the advisory lock (pg_advisory_unlock) on the connection
// that took it. Only the first call does anything; later calls return the
// first call's result. It returns ErrNotHeld if the server says the session
// did not hold the lock, or the driver error (then the lock is released when
// the connection closes). Use a context that is not cancelled, e.g.
// context.WithoutCancel(ctx), when releasing after a cancellation.
func (l *SessionLock) Release(ctx context.Context) error {
	l.once.Do(func() {
		var ok bool
		if err := l.conn.QueryRow(ctx, pgAdvisoryUnlock, l.key).Scan(&ok); err != nil {
			l.err = err
			return
		}
		if !ok {
			l.err = ErrNotHeld
		}
	})
	return l.err
}

// AdvisoryLock takes the exclusive session-level advisory lock key on conn
// (pg_advisory_lock), waiting while another session holds it, and returns
// a handle whose Release unlocks it. Session locks belong to the
// connection, so conn must be one dedicated connection (from a pool:
// c, _ := pool.Acquire(ctx); AdvisoryLock(ctx, c.Conn(), key)), which must
// not go back to the pool before Release. The lock is re-entrant: the same
// session can take it again, and must release it as many times.
//
// Errors: ErrInvalidArgument (nil conn); ErrLockTimeout when lock_timeout
// expires, or joined with ctx.Err() when ctx ends during the wait (pgx then
// closes the connection, which frees anything the session held);
// ErrDeadlock.
func AdvisoryLock(ctx context.Context, conn *pgx.Conn, key int64) (*SessionLock, error) {
	if conn == nil {
		return nil, invalid("nil connection")
	}
	if _, err := conn.Exec(ctx, pgAdvisoryLock, key); err != nil {
		return nil, mapError(ctx, err, Wait, false, true)
	}
	return &SessionLock{conn: conn, key: key}, nil
}

// TryAdvisoryLock takes the session-level advisory lock key on conn without
// waiting (pg_try_advisory_lock). It returns the handle, or
// ErrLockNotAvailable when another session holds the lock,
// ErrInvalidArgument for a nil conn, or the driver error. See AdvisoryLock
// for the rules on conn.
func TryAdvisoryLock(ctx context.Context, conn *pgx.Conn, key int64) (*SessionLock, error) {
	if conn == nil {
		return nil, invalid("nil connection")
	}
	var ok bool
	if err := conn.QueryRow(ctx, pgTryAdvisoryLock, key).Scan(&ok); err != nil {
		return nil, mapError(ctx, err, NoWait, false, false)
	}
	if !ok {
		return nil, ErrLockNotAvailable
	}
	return &SessionLock{conn: conn, key: key}, nil
}
