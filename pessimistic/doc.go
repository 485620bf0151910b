// Package pessimistic takes locks before it writes: row locks
// (SELECT … FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE with wait, NOWAIT,
// SKIP LOCKED or a lock timeout), a SKIP LOCKED job-claiming helper for
// queue workers, and PostgreSQL advisory locks, all inside transaction
// closure helpers that roll back on error or panic and retry deadlock
// victims and serialization failures.
//
// PostgreSQL is reached through pgx v5 (InTx, LockRows, ClaimJobs, the
// advisory locks); MariaDB 10.11 and MySQL 8 through database/sql with
// github.com/go-sql-driver/mysql (InTxMySQL, LockRowsMySQL, ClaimJobsMySQL).
// The retry loop, error mapping and lock clauses are written once; each
// driver has a thin adapter.
//
// # Transactions
//
// InTx(ctx, db, opts, fn) begins a transaction, runs fn, and commits. An
// error or a panic in fn rolls back (a panic is re-raised afterwards).
// Retryable failures — deadlock victims and serialization failures, and
// with Options.RetryLockNotAvailable also NOWAIT conflicts — run the whole
// transaction again under a retry.Policy, so fn may run more than once. A
// COMMIT whose answer was lost (connection failure) is reported as
// *AmbiguousCommitError and never retried.
//
// # Lock clauses
//
// A Lock is a Strength (ForUpdate, ForNoKeyUpdate, ForShare) and a
// WaitPolicy (Wait, NoWait, SkipLocked, WaitTimeout with Lock.Timeout).
// Lock.Postgres and Lock.MySQL render the clause; LockRows renders it,
// quotes the table and column, binds the keys, and locks rows in key order.
// Dialect differences: MySQL/MariaDB have no FOR NO KEY UPDATE, so it is
// taken as FOR UPDATE (stronger, still correct); their shared lock is
// LOCK IN SHARE MODE; WaitTimeout is MariaDB's WAIT n in whole seconds
// rounded up, and on PostgreSQL a lock_timeout set around the statement.
//
// # Isolation
//
// Both READ COMMITTED and REPEATABLE READ are supported (and tested). A
// row lock guarantees that no one else changes the row until the
// transaction ends, but only a read that sees the latest version is safe
// to write back: PostgreSQL's REPEATABLE READ fails a lock on a row
// changed after the snapshot (ErrSerialization, retried by InTx), while
// MariaDB's REPEATABLE READ grants it and keeps serving plain SELECTs from
// the old snapshot (see LockRowsMySQL). ClaimJobs and ClaimJobsMySQL never
// hand one job to two workers under either level; under REPEATABLE READ
// PostgreSQL reports a job claimed after the snapshot as ErrSerialization
// (retried by InTx), while MariaDB's locking read skips it.
//
// # Errors
//
// Driver errors are classified by SQLSTATE and server error number and
// wrapped, so both the sentinel and the driver error match errors.Is /
// errors.As:
//
//	ErrLockNotAvailable  PG 55P03 under NOWAIT, MySQL 3572, MariaDB 1205 under NOWAIT,
//	                     pg_try_advisory_* returning false
//	ErrLockTimeout       PG 55P03 under lock_timeout, MySQL/MariaDB 1205 otherwise:
//	                     the server's own timeout, never the caller's context
//	ErrDeadlock          PG 40P01, MySQL/MariaDB 1213 (retryable)
//	ErrSerialization     PG 40001, MariaDB ≥ 11.6 1020 under REPEATABLE READ (retryable)
//	ErrInvalidArgument   bad input: identifiers, nil handles, negative timeouts, n <= 0
//
// MariaDB reports NOWAIT with 1205, the lock-wait-timeout number, so only
// code that knows the statement's wait policy (LockRowsMySQL, Lock.MapError)
// can tell ErrLockNotAvailable from ErrLockTimeout; InTxMySQL alone maps
// 1205 to ErrLockTimeout.
//
// Cancellation: when ctx ends while a helper of this package waits for a
// lock (LockRows, AdvisoryLock, AdvisoryXactLock, InTx, or a statement
// whose error goes through Lock.MapError), the error matches ctx.Err() —
// context.Canceled, or context.DeadlineExceeded for the caller's deadline —
// with the driver error in the chain, and it does not match ErrLockTimeout:
// that sentinel means the server's lock timeout ended the wait. Both
// drivers return at once; pgx and go-sql-driver/mysql close the
// connection, and the server ends the abandoned wait on its own.
//
// # Durations
//
// Lock timeouts (Lock.Timeout, Options.LockTimeout) are converted to the
// server's unit by rounding up — a positive duration never becomes 0,
// which PostgreSQL reads as "no timeout" and MariaDB's WAIT as NOWAIT — and
// clamped to the server's maximum: lock_timeout 2147483647 ms (about 24.8
// days), WAIT n 31536000 s (365 days), innodb_lock_wait_timeout 100000000
// s (MariaDB's maximum; MySQL 8 allows more). A clamped wait can only end
// earlier than asked, with ErrLockTimeout. Negative durations are
// ErrInvalidArgument; zero is the documented default (Options.LockTimeout:
// the server's setting; Lock.Timeout: required under WaitTimeout, zero
// elsewhere).
package pessimistic
