// Package fencedmysql is the MariaDB/MySQL (database/sql with
// go-sql-driver/mysql) adapter of package fenced, with the same functions
// as fencedpg: Write, Update, Admit and Sequence (NewSequence,
// CreateSequence; MariaDB only). With fenced.Table.VersionColumn set,
// Write and Update also increment the row's version in the same guarded
// statement, so optimistic compare-and-swap writers on the same rows see
// the fenced write as a conflict.
//
// Where a write changed nothing, the token is read back with a locking
// read: inside a REPEATABLE READ transaction a plain SELECT would read the
// transaction's old snapshot and could mistake a successor's newer token
// for the caller's own. Given a *sql.DB, a write whose context ends while
// it waits for a lock is stopped on the server (KILL QUERY) before the call
// returns; where that cannot be confirmed the error is
// *concurkit.AmbiguousCommitError (matching concurkit.ErrOutcomeUnknown).
//
// Every function takes a DBTX, so a *sql.DB, *sql.Conn or *sql.Tx all
// work. Identifiers are validated and quoted with backticks; values are
// always bind parameters; each statement is built once per (table,
// assigned columns) and cached. The package links the MySQL driver only:
// no pgx, no AWS SDK.
//
// # Galera
//
// On a MariaDB Galera cluster written on several nodes the guarantees
// hold across nodes: a token lower than one accepted on any node is
// refused, accepted tokens strictly increase, and no accepted write is
// lost. A row lock does not hold back a writer on another node, and a
// node may not yet have applied a newer token: the guard then passes on
// the node's old row, and Galera's certification refuses the write at
// COMMIT with 1213 (the newer token's write set was certified first). That
// error is a definite failure — nothing was written — not an unknown
// outcome. Given a *sql.DB, Write, Update and Admit run the statement
// again (retry's default policy), and it is then refused with
// fenced.ErrStaleToken; in a *sql.Tx the 1213 fails the caller's
// transaction, which its loop (pessimisticmysql.InTx) runs again.
//
// The token read back after a write that changed nothing (or inserted)
// is not certified either. Outside a *sql.Tx it may run on another
// connection, so on another node, so it first waits until its node has
// applied what the cluster committed before it (SET STATEMENT
// wsrep_sync_wait, inside a MariaDB executable comment that MySQL reads
// as a comment; without the wait a pool over the nodes read a row from
// before the caller's own insert, ErrNotFound). In a *sql.Tx, where
// MariaDB does not wait, a write that found the caller's own token and
// changed nothing lowers the token and raises it back on Galera
// (@@wsrep_on, asked only then): the row is then in the transaction's
// write set, and its COMMIT fails with 1213 if a newer token was
// committed meanwhile (the row's triggers and ON UPDATE columns see two
// updates). No session setting is needed.
//
// Your own read under a lease needs one setting on Galera: the previous
// holder may have written through another node, not yet applied on this
// one, and a write computed from that stale read carries a higher token,
// so the guard accepts it and the previous holder's update is lost. Read
// causally — SET STATEMENT wsrep_sync_wait = 1 FOR SELECT … in
// autocommit, or SET SESSION wsrep_sync_wait = 1 before the BEGIN of the
// transaction that reads and writes (MariaDB ignores the wait inside a
// transaction). The benchmark's etcd-fenced cells lost updates on Galera
// until it did (28 of them in the full grid).
//
// Sequence cannot be used on Galera (see Sequence).
package fencedmysql
