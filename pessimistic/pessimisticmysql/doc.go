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
//
// # Galera
//
// On a MariaDB Galera cluster whose nodes all take writes, a row lock is
// the node's own: SELECT … FOR UPDATE (Clause, LockRows, ClaimJobs) does
// not wait for the same lock held on another node. Both transactions
// write; the one certified second fails with 1213 — at its COMMIT, or at
// its next statement when the winner's write, applied on its node, needs
// its locks. That is ErrDeadlock, a definite failure (never an ambiguous
// commit: nothing was written), and InTx runs the whole transaction again.
// So ClaimJobs' SKIP LOCKED can hand one job to a worker on each node, and
// all but one of those claims then fail and claim again. Measured on
// MariaDB 10.11.19 with Galera 4.23, clients spread over three nodes: 200
// buyers of a stock of 3 exact under every strategy, 200 jobs claimed once
// each by 8 workers.
//
// Galera does not make a transaction that reads and writes several
// contended rows from several nodes at once safe: now and then one
// commits over another's update (Jepsen found this Lost Update, P4, in a
// healthy MariaDB Galera cluster in 2026). Transfers between 4 accounts
// from three nodes (TestGaleraTransfers, 360 each) lost money in 4 of 25
// runs under ForUpdate, 9 under NoWaitRetry, 5 under SerializableRetry and
// 15 under LockRows, every failure retried and every commit acknowledged.
// wsrep_sync_wait does not prevent it (it orders reads, not writes). Send
// the writes of rows that such transactions share to one node — a single
// writer behind the proxy, or each group of rows to a node of its own:
// written that way (the tests' homed runs) every strategy is exact.
//
// wsrep_sync_wait matters for a transaction that decides without writing:
// one that reads a row on a node that has not applied another node's
// newer commit and returns (sold out, nothing to claim) is not certified.
// Where such a decision must see every earlier commit, open the sessions
// with wsrep_sync_wait = 1 (a DSN parameter): BEGIN then waits until the
// node has caught up with the cluster.
package pessimisticmysql
