package pessimistic

import (
	"fmt"

	"github.com/concurkit/concurkit"
)

// sentinel is an error callers branch on with errors.Is. typ is its
// observe.ErrorType name.
type sentinel struct{ msg, typ string }

func (e *sentinel) Error() string { return e.msg }

// ErrorType returns the error's stable low-cardinality name, for
// observe.ErrorType and metric attributes.
func (e *sentinel) ErrorType() string { return e.typ }

// retryableSentinel is a sentinel that retry.IsRetryable retries: the
// server has rolled the transaction back and running it again may succeed.
type retryableSentinel struct{ sentinel }

// Retryable reports true: see retry.IsRetryable.
func (*retryableSentinel) Retryable() bool { return true }

// Sentinel errors. The adapters (pessimisticpg, pessimisticmysql) return
// errors that wrap one of them together with the driver's own error, so
// errors.Is(err, ErrDeadlock) and errors.As(err, &pgErr) (or &mysqlErr)
// both work. Each has an ErrorType() name for observe.ErrorType.
var (
	// ErrLockNotAvailable: the lock is held by another transaction and the
	// caller asked not to wait (NOWAIT; pg_try_advisory_*). Sources:
	// PostgreSQL 55P03 under NOWAIT, MySQL 8 3572, MariaDB 1205 under NOWAIT
	// (MariaDB reports NOWAIT with the lock-wait-timeout number). Not retried
	// unless Options.RetryLockNotAvailable is set. ErrorType
	// "lock_not_available".
	ErrLockNotAvailable error = &sentinel{"pessimistic: lock not available", "lock_not_available"}

	// ErrLockTimeout: the server ended the lock wait at its lock timeout
	// (PostgreSQL lock_timeout → 55P03, MySQL/MariaDB
	// innodb_lock_wait_timeout or WAIT n → 1205). A wait ended by the
	// caller's context is not a lock timeout: that error matches
	// context.Canceled or context.DeadlineExceeded instead. Not retried by
	// default. ErrorType "lock_timeout".
	ErrLockTimeout error = &sentinel{"pessimistic: lock wait timed out", "lock_timeout"}

	// ErrDeadlock: the transaction was chosen as a deadlock victim and rolled
	// back (PostgreSQL 40P01, MySQL/MariaDB 1213). Retryable. ErrorType
	// "deadlock".
	ErrDeadlock error = &retryableSentinel{sentinel{"pessimistic: deadlock victim", "deadlock"}}

	// ErrSerialization: a serialization failure under REPEATABLE READ or
	// SERIALIZABLE (PostgreSQL 40001; MariaDB ≥ 11.6 1020, "Record has
	// changed since last read", under REPEATABLE READ). Retryable.
	// ErrorType "serialization".
	ErrSerialization error = &retryableSentinel{sentinel{"pessimistic: serialization failure", "serialization"}}

	// ErrNotHeld is returned by pessimisticpg's SessionLock.Release when the
	// server says the session did not hold the advisory lock (already
	// released, or the connection was replaced). ErrorType "not_held".
	ErrNotHeld error = &sentinel{"pessimistic: advisory lock not held", "not_held"}
)

// errInvalid prefixes this package's bad-input errors; they match
// concurkit.ErrInvalidArgument.
var errInvalid = concurkit.InvalidArgumentError("pessimistic: invalid argument")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalid}, args...)...)
}
