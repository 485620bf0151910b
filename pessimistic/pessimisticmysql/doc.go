// Package pessimisticmysql is the MariaDB 10.11 / MySQL 8 adapter of
// package pessimistic, through database/sql and
// github.com/go-sql-driver/mysql: transactions that retry deadlocks,
// MariaDB's snapshot conflicts (1020) and optimistic conflicts (InTx,
// InTxValue), row locks in key order (LockRows), SKIP LOCKED job claiming
// (ClaimJobs), and the locking clause of a pessimistic.Lock and the
// mapping of its errors for statements of your own (Clause, MapError).
//
// Handles are database/sql's: DBTX (*sql.DB, *sql.Conn, *sql.Tx) for
// statements and for InTx — on a Beginner (*sql.DB, *sql.Conn) InTx owns
// and retries the transaction; on a *sql.Tx the caller opened it runs fn
// once inside it. Types, sentinels and semantics are the core's: see
// package pessimistic. This package never links pgx or the AWS SDK.
package pessimisticmysql
