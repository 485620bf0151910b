package pessimistic

import (
	"database/sql"
	"time"

	"github.com/concurkit/concurkit/retry"
)

// Options configures the adapters' InTx and InTxValue. A nil *Options and
// the zero value mean: the server's default isolation level, the server's
// lock timeout, and retry.Policy defaults retrying conflicts, deadlock
// victims and serialization failures. InTx never modifies the struct.
//
// When InTx is given a transaction the caller already opened, it runs fn
// once and never retries (the caller's own loop owns retries): Retry and
// RetryLockNotAvailable are then unused, and Isolation must be zero (the
// caller's transaction already has its level).
type Options struct {
	// Isolation is the transaction isolation level. sql.LevelDefault (zero)
	// keeps the server default (PostgreSQL READ COMMITTED, MariaDB
	// REPEATABLE READ). Supported: LevelReadUncommitted, LevelReadCommitted,
	// LevelRepeatableRead, LevelSerializable; others are bad input
	// (concurkit.ErrInvalidArgument).
	Isolation sql.IsolationLevel

	// LockTimeout bounds every lock wait inside the transaction. Zero keeps
	// the server's setting; negative is bad input. PostgreSQL:
	// set_config('lock_timeout', …, true), i.e. SET LOCAL, in milliseconds
	// rounded up (at most 2147483647). MariaDB/MySQL: the session variable
	// innodb_lock_wait_timeout, in whole seconds rounded up (minimum 1,
	// maximum 100000000), set before BEGIN and restored after
	// COMMIT/ROLLBACK, because the connection goes back to the pool
	// afterwards.
	LockTimeout time.Duration

	// Retry is the retry policy for whole transactions; the zero value uses
	// the retry package defaults (retry for up to 5 s, 2 ms base, 100 ms
	// cap, full jitter). With a nil Retry.Retryable the classifier is
	// retry.IsRetryable, which retries ErrDeadlock, ErrSerialization and
	// optimistic.ErrConflict (so a closure doing optimistic compare-and-swap
	// writes is run again on a version conflict). MaxAttempts 1 disables
	// retries. Ambiguous commits and context errors are never retried.
	// Retries are reported to the observe hooks on the context (package
	// "retry").
	Retry retry.Policy

	// RetryLockNotAvailable also retries ErrLockNotAvailable: the
	// "NOWAIT + retry" pattern, where a locked row makes the transaction
	// back off and run again instead of queueing on the lock.
	RetryLockNotAvailable bool
}
