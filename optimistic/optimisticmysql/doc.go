// Package optimisticmysql is the MySQL/MariaDB (database/sql +
// go-sql-driver/mysql) adapter of package optimistic: Update is the
// version-checked compare-and-swap of one row. The types, sentinels and
// the retry loop are in optimistic; multi-row work goes inside
// pessimisticmysql.InTx, which retries optimistic.ErrConflict.
//
// Neither server has UPDATE … RETURNING. The statement is the hand-written
// CAS (UPDATE … WHERE key = ? AND version = ?), one round trip on success
// whatever the DSN's clientFoundRows setting (a matching row always
// changes, since its version moves). Only a miss costs a second statement,
// a read of the key that tells a conflict from a missing row: a locking
// read on a *sql.Tx or *sql.Conn (correct even inside an older REPEATABLE
// READ snapshot), a plain autocommit read on a *sql.DB (the newest
// committed row, without queueing behind the row's lock holders). The
// session's
// LAST_INSERT_ID() is not touched. Both statements are built, validated
// and quoted once per (Table, set columns) and cached.
//
// When ctx ends during the statement on a *sql.DB, the statement is
// stopped on the server (KILL QUERY from another connection) before
// Update returns; where that cannot be confirmed the error is a
// *concurkit.AmbiguousCommitError.
//
// The package imports database/sql, go-sql-driver/mysql and the standard
// library, nothing of pgx or the AWS SDK.
package optimisticmysql
