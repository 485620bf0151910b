// Package pessimisticpg is the PostgreSQL (pgx v5) adapter of package
// pessimistic: transactions that retry deadlocks, serialization failures
// and optimistic conflicts (InTx, InTxValue), row locks in key order
// (LockRows), SKIP LOCKED job claiming (ClaimJobs), the locking clause of a
// pessimistic.Lock and the mapping of its errors for statements of your own
// (Clause, MapError), and advisory locks (AdvisoryLock, TryAdvisoryLock,
// AdvisoryXactLock, TryAdvisoryXactLock).
//
// Handles are pgx's: DBTX (*pgxpool.Pool, *pgxpool.Conn, *pgx.Conn,
// pgx.Tx) for statements, Beginner (the same, in pgx.BeginFunc's shape)
// for InTx — on a pool or connection InTx owns and retries the
// transaction; on a pgx.Tx the caller opened it runs fn once in a
// savepoint. Types, sentinels and semantics are the core's: see package
// pessimistic. This package never links the MySQL driver or the AWS SDK.
package pessimisticpg
