// Package pessimistic takes locks before it writes: row locks
// (SELECT … FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE with wait, NOWAIT,
// SKIP LOCKED or a lock timeout), a SKIP LOCKED job-claiming helper for
// queue workers, and PostgreSQL advisory locks, all inside transaction
// closure helpers that roll back on error or panic and retry deadlock
// victims, serialization failures and optimistic version conflicts.
//
// # Layout: a driver-neutral core and one adapter per driver
//
// This package is the core: the types (Lock, Strength, WaitPolicy,
// Options, ClaimOptions, Job, Key), the sentinel errors and AdvisoryKey.
// It imports only the standard library, so importing it links no driver.
// The calls that talk to a database live in one thin adapter per driver
// family, which is what an application imports:
//
//	pessimistic/pessimisticpg     PostgreSQL through pgx v5: InTx, InTxValue,
//	                              LockRows, ClaimJobs, Clause, MapError,
//	                              AdvisoryLock, TryAdvisoryLock,
//	                              AdvisoryXactLock, TryAdvisoryXactLock
//	pessimistic/pessimisticmysql  MariaDB 10.11 / MySQL 8 through database/sql
//	                              and github.com/go-sql-driver/mysql: InTx,
//	                              InTxValue, LockRows, ClaimJobs, Clause, MapError
//
// The retry loop, the mapping of driver errors to the sentinels and the
// checks are written once and shared by both adapters (the layout of
// cockroach-go's crdb and crdbpgxv5); the pessimisticpg path never links
// the MySQL driver, and the pessimisticmysql path never links pgx.
//
// # Transactions
//
// InTx(ctx, db, opts, fn) begins a transaction, runs fn, and commits. An
// error or a panic in fn rolls back (a panic is re-raised afterwards).
// Retryable failures — deadlock victims, serialization failures and
// optimistic.ErrConflict, and with Options.RetryLockNotAvailable also
// NOWAIT conflicts — run the whole transaction again under a retry.Policy
// (through retry.Do, whose observe hooks report each retry), so fn may run
// more than once. This makes InTx the way to do multi-row optimistic work:
// several compare-and-swap writes in one closure commit together or are
// retried together. A COMMIT whose answer was lost (connection failure) is
// reported as *concurkit.AmbiguousCommitError (matching
// concurkit.ErrOutcomeUnknown) and never retried. InTxValue is the same for
// a closure that returns a value.
//
// InTx also accepts a transaction the caller already opened (pgx.Tx,
// *sql.Tx): fn then runs once inside it (PostgreSQL: inside a savepoint),
// with no retry and no commit, and fn's error goes back to the caller's own
// loop, typically an outer InTx. So a repository function can take either a
// pool or a transaction and call InTx unconditionally.
//
// # Lock clauses
//
// A Lock is a Strength (ForUpdate, ForNoKeyUpdate, ForShare) and a
// WaitPolicy (Wait, NoWait, SkipLocked, WaitTimeout with Lock.Timeout).
// The adapters' Clause renders it for a statement of your own, MapError
// maps that statement's error, and LockRows renders it, quotes the table
// and column, binds the keys, and locks rows in key order. Dialect
// differences: MySQL/MariaDB have no FOR NO KEY UPDATE, so it is taken as
// FOR UPDATE (stronger, still correct); their shared lock is LOCK IN SHARE
// MODE; WaitTimeout is MariaDB's WAIT n in whole seconds rounded up, and on
// PostgreSQL a lock_timeout set around the statement (which is why LockRows
// accepts WaitTimeout only on a transaction).
//
// # Isolation
//
// Both READ COMMITTED and REPEATABLE READ are supported (and tested). A
// row lock guarantees that no one else changes the row until the
// transaction ends, but only a read that sees the latest version is safe
// to write back: PostgreSQL's REPEATABLE READ fails a lock on a row
// changed after the snapshot (ErrSerialization, retried by InTx), while
// MariaDB's REPEATABLE READ grants it and keeps serving plain SELECTs from
// the old snapshot (see pessimisticmysql.LockRows). ClaimJobs never hands
// one job to two workers under either level; under REPEATABLE READ
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
//	ErrNotHeld           an advisory unlock the server says was not held
//
// Bad input — identifiers, nil handles, negative timeouts, n <= 0, a
// WaitTimeout outside a transaction — is an error matching
// concurkit.ErrInvalidArgument, returned before any I/O. Every sentinel
// has an ErrorType() name for observe.ErrorType ("lock_not_available",
// "lock_timeout", "deadlock", "serialization", "not_held").
//
// MariaDB reports NOWAIT with 1205, the lock-wait-timeout number, so only
// code that knows the statement's wait policy (LockRows, MapError) can tell
// ErrLockNotAvailable from ErrLockTimeout; InTx alone maps 1205 to
// ErrLockTimeout.
//
// Cancellation: when ctx ends while an adapter waits for a lock (LockRows,
// AdvisoryLock, AdvisoryXactLock, InTx, or a statement whose error goes
// through MapError), the error matches ctx.Err() — context.Canceled, or
// context.DeadlineExceeded for the caller's deadline — with the driver
// error in the chain, and it does not match ErrLockTimeout: that sentinel
// means the server's lock timeout ended the wait. Both drivers return at
// once; pgx and go-sql-driver/mysql close the connection, and the server
// ends the abandoned wait on its own.
//
// # Observation
//
// With hooks on the context (observe.WithHooks), transaction retries are
// reported by retry.Do (Hooks.Retry, package "retry"), and a lock statement
// of LockRows or the advisory locks that fails by the server's lock
// timeout, by NOWAIT or by the end of ctx is reported to Hooks.LockWait
// (Package "pessimisticpg" or "pessimisticmysql", Key the table name or the
// advisory key — never row keys —, Wait the statement's duration, Err).
// Without hooks this costs nothing.
//
// # Durations
//
// Lock timeouts (Lock.Timeout, Options.LockTimeout) are converted to the
// server's unit by rounding up — a positive duration never becomes 0,
// which PostgreSQL reads as "no timeout" and MariaDB's WAIT as NOWAIT — and
// clamped to the server's maximum: lock_timeout 2147483647 ms (about 24.8
// days), WAIT n 31536000 s (365 days), innodb_lock_wait_timeout 100000000
// s (MariaDB's maximum; MySQL 8 allows more). A clamped wait can only end
// earlier than asked, with ErrLockTimeout. Negative durations are bad
// input; zero is the documented default (Options.LockTimeout: the server's
// setting; Lock.Timeout: required under WaitTimeout, zero elsewhere).
package pessimistic
