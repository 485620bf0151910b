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
// The package imports database/sql, go-sql-driver/mysql and the standard
// library, nothing of pgx or the AWS SDK.
package upsertmysql
