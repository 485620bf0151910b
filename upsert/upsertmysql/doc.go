// Package upsertmysql is the MySQL/MariaDB (database/sql +
// go-sql-driver/mysql) adapter of package upsert: Insert, Upsert and
// InsertOrGet report whether the call created the row, whatever the DSN's
// clientFoundRows setting. Table, ErrContended and MaxReadAttempts are in
// upsert; see its documentation for how MySQL tells a created row from an
// existing one (a LAST_INSERT_ID marker set only in the ON DUPLICATE KEY
// branch).
//
// Cancellation: given a *sql.DB (autocommit), a statement still running
// when ctx ends — typically queued behind another transaction's lock on
// the key — is stopped on the server (KILL QUERY from another pooled
// connection) before the call returns, so a cancelled write did not
// happen; if that cannot be confirmed within a few seconds the error is a
// *concurkit.AmbiguousCommitError. In a *sql.Tx the driver drops the
// connection and the server rolls the transaction back, so the write can
// never commit. On a *sql.Conn a call cut short by ctx returns
// *concurkit.AmbiguousCommitError (no second connection to stop the
// statement from). In every case the error matches ctx.Err().
//
// Galera: on a cluster whose nodes all take writes, two nodes can insert
// the same key at once, each finding it free on its own copy; the second
// to be certified fails (1213) and, on a *sql.DB, is run again, finds the
// row and reports created == false — so exactly one caller is told it
// created the row (measured on MariaDB 10.11.19 with Galera 4.23: 64
// concurrent callers of one key, and 200 buyers of 3 units, exact). An
// existing row found (created == false) is a decision without a write and
// is not certified, but it is never stale: the row was there. A read on
// another node may lag behind the write, which is why Upsert and
// InsertOrGet read back on the write's own connection. Idempotent
// transfers — Insert of the transfer's record, then two escrow UPDATEs, in
// one transaction, each sent twice at once from two nodes — were applied
// once each in 10 runs of 180, and lost no update; but a transaction that
// writes several rows from several nodes has no promise of that on Galera
// (see package pessimisticmysql).
//
// The package imports database/sql, go-sql-driver/mysql and the standard
// library, nothing of pgx or the AWS SDK.
package upsertmysql
