package pessimistic

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/concurkit/concurkit/retry"
)

// Options configures InTx and InTxMySQL. A nil *Options and the zero value
// mean: the server's default isolation level, the server's lock timeout, and
// retry.Policy defaults retrying deadlock victims and serialization
// failures. The functions never modify the struct.
type Options struct {
	// Isolation is the transaction isolation level. sql.LevelDefault (zero)
	// keeps the server default (PostgreSQL READ COMMITTED, MariaDB
	// REPEATABLE READ). Supported: LevelReadUncommitted, LevelReadCommitted,
	// LevelRepeatableRead, LevelSerializable; others are ErrInvalidArgument.
	Isolation sql.IsolationLevel

	// LockTimeout bounds every lock wait inside the transaction. Zero keeps
	// the server's setting; negative is ErrInvalidArgument.
	// PostgreSQL: set_config('lock_timeout', …, true), i.e. SET LOCAL, in
	// milliseconds rounded up. MariaDB/MySQL: the session variable
	// innodb_lock_wait_timeout, in whole seconds rounded up (minimum 1),
	// set after BEGIN and restored before COMMIT/ROLLBACK, because the
	// connection goes back to the pool afterwards.
	LockTimeout time.Duration

	// Retry is the retry policy for whole transactions; the zero value uses
	// the retry package defaults (10 attempts, 2 ms base, 500 ms cap, full
	// jitter). With a nil Retry.Retryable the classifier is
	// retry.IsRetryable, which retries ErrDeadlock and ErrSerialization.
	// MaxAttempts 1 disables retries. Ambiguous commits are never retried.
	Retry retry.Policy

	// RetryLockNotAvailable also retries ErrLockNotAvailable: the
	// "NOWAIT + retry" pattern, where a locked row makes the transaction
	// back off and run again instead of queueing on the lock.
	RetryLockNotAvailable bool
}

func (o *Options) value() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	if v.LockTimeout < 0 {
		return v, invalid("negative LockTimeout %v", v.LockTimeout)
	}
	switch v.Isolation {
	case sql.LevelDefault, sql.LevelReadUncommitted, sql.LevelReadCommitted,
		sql.LevelRepeatableRead, sql.LevelSerializable:
	default:
		return v, invalid("unsupported isolation level %v", v.Isolation)
	}
	if err := v.Retry.Validate(); err != nil {
		return v, invalid("%w", err)
	}
	base := v.Retry.Retryable
	if base == nil {
		base = retry.IsRetryable
	}
	lockNA := v.RetryLockNotAvailable
	v.Retry.Retryable = func(err error) bool {
		var amb *AmbiguousCommitError
		switch {
		case errors.As(err, &amb),
			errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return false
		case lockNA && errors.Is(err, ErrLockNotAvailable):
			return true
		}
		return base(err)
	}
	return v, nil
}
