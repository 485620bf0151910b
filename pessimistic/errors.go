package pessimistic

import (
	"context"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

// lockError is a sentinel that retry.IsRetryable does not retry.
type lockError string

func (e lockError) Error() string { return string(e) }

// retryableError is a sentinel that retry.IsRetryable retries: the server
// has rolled the transaction back and running it again may succeed.
type retryableError string

func (e retryableError) Error() string { return string(e) }

// Retryable reports true: see retry.IsRetryable.
func (retryableError) Retryable() bool { return true }

// Sentinel errors. Errors returned by this package wrap one of them together
// with the driver's own error, so errors.Is(err, ErrDeadlock) and
// errors.As(err, &pgErr) (or &mysqlErr) both work.
var (
	// ErrLockNotAvailable: the lock is held by another transaction and the
	// caller asked not to wait (NOWAIT; pg_try_advisory_*). Sources:
	// PostgreSQL 55P03 under NOWAIT, MySQL 8 3572, MariaDB 1205 under NOWAIT
	// (MariaDB reports NOWAIT with the lock-wait-timeout number). Not retried
	// unless Options.RetryLockNotAvailable is set.
	ErrLockNotAvailable error = lockError("pessimistic: lock not available")

	// ErrLockTimeout: the server ended the lock wait at its lock timeout
	// (PostgreSQL lock_timeout → 55P03, MySQL/MariaDB
	// innodb_lock_wait_timeout or WAIT n → 1205). A wait ended by the
	// caller's context is not a lock timeout: that error matches
	// context.Canceled or context.DeadlineExceeded instead. Not retried by
	// default.
	ErrLockTimeout error = lockError("pessimistic: lock wait timed out")

	// ErrDeadlock: the transaction was chosen as a deadlock victim and rolled
	// back (PostgreSQL 40P01, MySQL/MariaDB 1213). Retryable.
	ErrDeadlock error = retryableError("pessimistic: deadlock victim")

	// ErrSerialization: a serialization failure under REPEATABLE READ or
	// SERIALIZABLE (PostgreSQL 40001; MariaDB ≥ 11.6 1020, "Record has
	// changed since last read", under REPEATABLE READ). Retryable.
	ErrSerialization error = retryableError("pessimistic: serialization failure")

	// ErrInvalidArgument is wrapped by every error about bad input: an empty
	// or invalid identifier, a nil handle or function, a negative timeout,
	// n <= 0, an unsupported isolation level or lock combination.
	ErrInvalidArgument = errors.New("pessimistic: invalid argument")

	// ErrNotHeld is returned by SessionLock.Release when the server says the
	// session did not hold the advisory lock (already released, or the
	// connection was replaced).
	ErrNotHeld = errors.New("pessimistic: advisory lock not held")
)

// AmbiguousCommitError reports that COMMIT was sent but its outcome is
// unknown: the connection failed (or the context ended) before the server's
// answer arrived. The transaction may or may not have committed; the caller
// must check the data (or make the work idempotent) before trying again.
// InTx never retries it.
type AmbiguousCommitError struct {
	Err error // the error COMMIT returned
}

// Error says the commit outcome is unknown and why.
func (e *AmbiguousCommitError) Error() string {
	return "pessimistic: commit outcome unknown: " + e.Err.Error()
}

// Unwrap returns the error COMMIT returned.
func (e *AmbiguousCommitError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// mapped reports whether err already carries one of the lock sentinels.
func mapped(err error) bool {
	return errors.Is(err, ErrLockNotAvailable) || errors.Is(err, ErrLockTimeout) ||
		errors.Is(err, ErrDeadlock) || errors.Is(err, ErrSerialization)
}

func wrap(sentinel, err error) error { return fmt.Errorf("%w: %w", sentinel, err) }

// mariaDBRecordChanged is MariaDB's ER_CHECKREAD, "Record has changed since
// last read": from MariaDB 11.6 (innodb_snapshot_isolation=ON, the
// default) a REPEATABLE READ transaction that writes or locks a row
// changed after its snapshot gets it and must run again, as PostgreSQL's
// 40001. Checked here as well as in internal/sqlerr so that the mapping
// does not depend on how that package classifies it.
const mariaDBRecordChanged = 1020

// mapError maps a driver error to the package's sentinels.
//
// wait is the wait policy of the statement that failed, or unknownWait (a
// statement the caller ran inside InTx); for unknownWait, lockTimeout tells
// whether InTx set a PostgreSQL lock_timeout.
//
// An error caused by the caller's context ending (ctx is done and the
// driver reports a cancelled or broken statement) is cancellation, not a
// lock timeout, whatever the statement was waiting for: it is returned
// matching ctx.Err() (joined with it when the driver error does not
// already match it), and never ErrLockTimeout, which is kept for the
// server's own timeouts.
func mapError(ctx context.Context, err error, wait WaitPolicy, lockTimeout bool) error {
	if err == nil || mapped(err) {
		return err
	}
	if mysqlerr.Number(err) == mariaDBRecordChanged {
		return wrap(ErrSerialization, err)
	}
	class := sqlerr.Classify(err)
	if class == sqlerr.Unknown {
		class = mysqlerr.Classify(err)
	}
	if cerr := ctx.Err(); cerr != nil && (class == sqlerr.Unknown || class == sqlerr.QueryCanceled) {
		if errors.Is(err, cerr) {
			return err
		}
		return errors.Join(cerr, err)
	}
	switch class {
	case sqlerr.Deadlock:
		return wrap(ErrDeadlock, err)
	case sqlerr.Serialization:
		return wrap(ErrSerialization, err)
	case sqlerr.LockNotAvailable:
		// PostgreSQL uses 55P03 for NOWAIT and for lock_timeout alike.
		// A statement that was allowed to wait can only get it from
		// lock_timeout; a statement of unknown policy got it from NOWAIT
		// unless a lock_timeout was set.
		if sqlerr.SQLState(err) == sqlerr.PGLockNotAvailable && wait != NoWait &&
			(wait != unknownWait || lockTimeout) {
			return wrap(ErrLockTimeout, err)
		}
		return wrap(ErrLockNotAvailable, err)
	case sqlerr.LockTimeout:
		// MariaDB reports NOWAIT with 1205, the lock-wait-timeout number.
		if wait == NoWait {
			return wrap(ErrLockNotAvailable, err)
		}
		return wrap(ErrLockTimeout, err)
	}
	return err
}
