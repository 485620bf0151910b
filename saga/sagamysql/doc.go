// Package sagamysql is the MariaDB/MySQL (database/sql with
// github.com/go-sql-driver/mysql) store of package saga: Store keeps saga
// instances in the table concurkit_sagas of the toolkit migrations
// (0004_saga), one row per instance, and implements saga.Store: Claim is
// an INSERT … ON DUPLICATE KEY UPDATE that takes the lease only if it is
// free, followed by a read of the row; Save and Extend are UPDATEs
// conditional on the runner's claim. Load and Unfinished read instances
// for inspection and recovery jobs.
//
// The handle is a DBTX: give it a *sql.DB. Each record must commit at
// once, so never a *sql.Tx (its commit would come after the steps it
// records). Writes go through concurkit's cancellation guard: when the
// context ends during a write on a *sql.DB, the statement is stopped on
// the server (KILL QUERY) or reported as outcome unknown, never left to
// commit later unseen. Times are stored in UTC, bound and read as text,
// so the DSN's parseTime and loc settings do not matter. No statement
// depends on the order in which the server evaluates assignments, so the
// claim holds under every sql_mode, MariaDB's SIMULTANEOUS_ASSIGNMENT
// included (tested with both).
//
// The package imports the MySQL driver and the standard library, nothing
// of pgx or the AWS SDK.
package sagamysql
