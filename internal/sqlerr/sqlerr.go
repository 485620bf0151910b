// Package sqlerr classifies PostgreSQL and MySQL/MariaDB driver errors by
// behaviour — what the caller should do about them — from their SQLSTATE or
// server error number, never from message text.
package sqlerr

import "errors"

// Class is what an error means for concurrency control.
type Class int

// The classes. Unknown covers every error that is none of the others,
// including nil.
const (
	Unknown          Class = iota
	Serialization          // PG 40001, MariaDB 1020: retry the transaction
	Deadlock               // PG 40P01, MySQL 1213: victim of a deadlock, retry
	LockNotAvailable       // PG 55P03, MySQL 3572: NOWAIT (or PG lock_timeout) found the row locked
	LockTimeout            // MySQL/MariaDB 1205: lock wait timeout (MariaDB also reports NOWAIT as 1205)
	UniqueViolation        // PG 23505, MySQL 1062: duplicate key
	QueryCanceled          // PG 57014, MySQL 1317/3024, MariaDB 1969: statement cancelled or timed out
)

var classNames = [...]string{"unknown", "serialization", "deadlock", "lock-not-available", "lock-timeout", "unique-violation", "query-canceled"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "unknown"
	}
	return classNames[c]
}

// PostgreSQL SQLSTATEs.
const (
	PGSerializationFailure = "40001"
	PGDeadlockDetected     = "40P01"
	PGLockNotAvailable     = "55P03"
	PGUniqueViolation      = "23505"
	PGQueryCanceled        = "57014"
	// PGSequenceLimit: nextval passed the sequence's MAXVALUE.
	PGSequenceLimit = "2200H"
)

// MySQL and MariaDB server error numbers.
const (
	MySQLLockWaitTimeout    = 1205
	MySQLDeadlock           = 1213
	MySQLLockNowait         = 3572 // MySQL 8 only; MariaDB reports 1205
	MySQLDuplicateEntry     = 1062
	MySQLQueryInterrupted   = 1317
	MySQLMaxExecutionTime   = 3024
	MariaDBStatementTimeout = 1969
	// MariaDBRecordChanged is ER_CHECKREAD, "Record has changed since last
	// read": with innodb_snapshot_isolation=ON (the default from MariaDB
	// 11.6; available since 10.6.18) a REPEATABLE READ transaction that
	// locks or modifies a row changed after its snapshot fails with it, and
	// InnoDB rolls the whole transaction back as it does a deadlock victim
	// (MDEV-35235). It is the MariaDB counterpart of PostgreSQL's 40001.
	MariaDBRecordChanged = 1020
	// MariaDBSequenceRunOut: NEXTVAL passed a (non-cycling) SEQUENCE's
	// MAXVALUE.
	MariaDBSequenceRunOut = 4084
)

// SQLState returns the PostgreSQL SQLSTATE in err's chain, or "".
// It relies on the SQLState() method that pgconn.PgError implements.
func SQLState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// Classify returns the class of a PostgreSQL error in err's chain (found
// through its SQLState() method), or Unknown. MySQL/MariaDB errors are
// classified by internal/mysqlerr, which imports the driver; this package
// imports only the standard library.
func Classify(err error) Class {
	if err == nil {
		return Unknown
	}
	switch SQLState(err) {
	case PGSerializationFailure:
		return Serialization
	case PGDeadlockDetected:
		return Deadlock
	case PGLockNotAvailable:
		return LockNotAvailable
	case PGUniqueViolation:
		return UniqueViolation
	case PGQueryCanceled:
		return QueryCanceled
	}
	return Unknown
}

// ClassifyMySQL returns the class of a MySQL/MariaDB server error number.
func ClassifyMySQL(number uint16) Class {
	switch number {
	case MySQLDeadlock:
		return Deadlock
	case MariaDBRecordChanged:
		return Serialization
	case MySQLLockWaitTimeout:
		return LockTimeout
	case MySQLLockNowait:
		return LockNotAvailable
	case MySQLDuplicateEntry:
		return UniqueViolation
	case MySQLQueryInterrupted, MySQLMaxExecutionTime, MariaDBStatementTimeout:
		return QueryCanceled
	}
	return Unknown
}

// Retryable reports whether err is a PostgreSQL deadlock or serialization
// failure: the database rolled the transaction back and running it again
// may succeed. internal/mysqlerr.Retryable is the MySQL/MariaDB
// counterpart.
func Retryable(err error) bool { return Classify(err).Retryable() }

// Retryable reports whether errors of class c are worth running the
// transaction again: deadlocks and serialization failures.
func (c Class) Retryable() bool { return c == Serialization || c == Deadlock }
