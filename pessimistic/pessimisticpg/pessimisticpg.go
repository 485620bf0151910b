package pessimisticpg

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

// pkg names this package in errors and observe events.
const pkg = "pessimisticpg"

// DBTX is the pgx v5 query interface (the shape of sqlc's DBTX):
// *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx all satisfy it. Row
// locks last until the end of the transaction, so the lock helpers are
// meant to be given a pgx.Tx (the one InTx passes to its closure).
type DBTX = pgxdb.DBTX

// Beginner is what InTx runs on, in pgx's own shape (the db of
// pgx.BeginFunc): *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn, on which
// InTx begins and owns the transaction (retrying it), and pgx.Tx, a
// transaction the caller already opened, in which InTx runs fn once inside
// a savepoint.
type Beginner = pgxdb.Beginner

var (
	_ DBTX     = (*pgxpool.Pool)(nil)
	_ DBTX     = (*pgxpool.Conn)(nil)
	_ DBTX     = (*pgx.Conn)(nil)
	_ DBTX     = pgx.Tx(nil)
	_ Beginner = (*pgxpool.Pool)(nil)
	_ Beginner = (*pgxpool.Conn)(nil)
	_ Beginner = (*pgx.Conn)(nil)
	_ Beginner = pgx.Tx(nil)
)

func invalid(format string, args ...any) error { return txn.Invalid(pkg, format, args...) }

// mapError maps a pgx error to pessimistic's sentinels. wait is the wait
// policy of the statement that failed, or txn.UnknownWait (a statement the
// caller ran inside InTx); for txn.UnknownWait, lockTimeout tells whether
// InTx set a lock_timeout.
//
// PostgreSQL uses 55P03 for NOWAIT and for lock_timeout alike: a statement
// that was allowed to wait can only get it from lock_timeout; a statement
// of unknown policy got it from NOWAIT unless a lock_timeout was set.
func mapError(ctx context.Context, err error, wait pessimistic.WaitPolicy, lockTimeout bool) error {
	if err == nil || txn.Mapped(err) {
		return err
	}
	c := sqlerr.Classify(err)
	if c == sqlerr.LockNotAvailable && wait != pessimistic.NoWait && (wait != txn.UnknownWait || lockTimeout) {
		c = sqlerr.LockTimeout
	}
	return txn.Map(ctx, err, c)
}

// MapError maps err, returned by a statement of your own that used lock's
// clause (see Clause), to pessimistic's sentinels: under NoWait a lock
// conflict (55P03) becomes ErrLockNotAvailable; under Wait or WaitTimeout
// (lock_timeout) it becomes ErrLockTimeout; deadlocks (40P01) become
// ErrDeadlock and serialization failures (40001) ErrSerialization. If ctx
// has ended and err is not one of those, the wait was ended by the caller,
// not by the server: the result matches ctx.Err()
// (errors.Join(ctx.Err(), err) unless err already matches it) and not
// ErrLockTimeout. The driver error stays in the chain. Other errors (and
// nil) are returned unchanged, and so is an error already mapped.
func MapError(ctx context.Context, lock pessimistic.Lock, err error) error {
	return mapError(ctx, err, lock.Wait, false)
}

// Clause returns lock's PostgreSQL locking clause with a leading space,
// e.g. " FOR NO KEY UPDATE SKIP LOCKED", to append to a SELECT. Under
// WaitTimeout the clause has no wait part: PostgreSQL bounds lock waits
// only through lock_timeout, which LockRows and Options.LockTimeout set for
// you. It returns lock.Validate's error (matching
// concurkit.ErrInvalidArgument) for an invalid lock.
func Clause(lock pessimistic.Lock) (string, error) {
	if err := lock.Validate(); err != nil {
		return "", err
	}
	s := " " + lock.Strength.String()
	switch lock.Wait {
	case pessimistic.NoWait:
		s += " NOWAIT"
	case pessimistic.SkipLocked:
		s += " SKIP LOCKED"
	}
	return s, nil
}

// maxMillis is the maximum of PostgreSQL's lock_timeout: INT_MAX
// milliseconds, about 24.8 days. A longer duration is clamped: the wait
// may end earlier than asked, with ErrLockTimeout, never later.
const maxMillis = 1<<31 - 1

// interval formats d for lock_timeout: milliseconds, rounded up, at least
// 1 (0 disables the timeout), at most maxMillis.
func interval(d time.Duration) string {
	return strconv.FormatInt(txn.CeilUnits(d, time.Millisecond, maxMillis), 10) + "ms"
}
