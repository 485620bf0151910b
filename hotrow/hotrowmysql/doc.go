// Package hotrowmysql is the MariaDB/MySQL (database/sql with
// go-sql-driver/mysql) adapter of hotrow: escrow updates (Add) and the
// Store a hotrow.Combiner batches through.
//
// The table needs a unique key column and a NOT NULL BIGINT value column:
//
//	CREATE TABLE stock (id BIGINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB;
//
// Add is one statement on any handle, a caller's transaction included: a
// conditional UPDATE whose affected-row count decides, with the floor and
// the BIGINT range checked in DECIMAL arithmetic (so a refused update
// raises no 1690 error), and whose WHERE clause hands the new value back
// through LAST_INSERT_ID(expr) in the statement's own OK packet: no second
// round trip on success, also with a pool. The statement has a single
// assignment, so it means the same under every sql_mode
// (SIMULTANEOUS_ASSIGNMENT included). A miss costs a second statement,
// which tells hotrow.ErrNotFound from ErrInsufficient and ErrOverflow.
//
// On a *sql.DB, a context that ends during the statement stops it on the
// server (KILL QUERY) before Add returns; when that cannot be confirmed
// the outcome is reported unknown (*concurkit.AmbiguousCommitError).
//
// Store.TryAdd is the same statement for a whole batch; Store.Locked is the
// batch's slow path near the floor: one transaction with SELECT … FOR
// UPDATE, the per-request decisions in Go, one UPDATE and one COMMIT.
//
// A statement or transaction the server rolled back — a deadlock victim,
// MariaDB's 1020, or on a Galera cluster one that another node's write
// beat at certification (1213) — wrote nothing and is run again: every
// method of the stores (a batch's locked transaction with its plan), and
// Add on a *sql.DB. Add on a *sql.Tx or *sql.Conn returns the error,
// retryable (retry.IsRetryable), for the caller's transaction loop.
//
// # Galera
//
// On a Galera cluster whose nodes all take writes, locks are the node's
// own: two nodes' escrow updates, batches or locked transactions on one row
// both run, and the one certified second fails (1213) and is run again, so
// it applies to the row as the winner left it. Measured on MariaDB 10.11.19
// with Galera 4.23, 200 buyers of a stock of 3 spread over three nodes —
// escrow on a pool over the nodes, one Combiner and one Sharded counter
// per node — exactly 3 succeed. Transfers between two rows (a Ledger per
// node, or two Adds in one transaction) from three nodes at once lost
// nothing in 10 runs of 360, but Galera does not promise it: transactions
// that read rows and then write them from several nodes now and then
// commit one over another's update (Lost Update, as Jepsen found in 2026;
// see package pessimisticmysql). Written to one node per group of rows,
// they are exact. A refusal (ErrInsufficient) writes nothing and is
// not certified: on a node that has not applied another node's newer
// increment it can refuse what the cluster holds; open the sessions with
// wsrep_sync_wait = 2 (UPDATE) where a refusal must see every earlier
// commit.
package hotrowmysql
