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
package hotrowmysql
