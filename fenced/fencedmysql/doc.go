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
package fencedmysql
