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
//
// # Galera
//
// On a MariaDB Galera cluster with runners on several nodes the
// guarantees hold across nodes: no step runs in two runners at once, and
// every saga completes or compensates once. A lease held on one node does
// not lock out a claim on another, and a node may not yet have applied a
// claim made elsewhere; but two claims of one instance both write its
// row, so certification lets only the first committed through: the other
// fails with 1213, a definite failure (its claim was not written), which
// the store runs again (retry's default policy) and which then finds the
// lease taken (ErrInProgress). Records and extensions are fenced and
// retried the same way. The store asks once whether the server is a
// Galera node (@@wsrep_on) and, if so, makes every statement but
// DeleteFinished's wait (SET STATEMENT wsrep_sync_wait) until its node has
// applied what the cluster committed before it: without the wait a claim's
// read-back on a node that had not applied the claim missed it (the
// claimant turned away with the lease held until it ended), records
// failed with ErrLeaseLost, and a finished saga looked in progress. No
// session setting is needed; each wait costs a round trip between nodes.
package sagamysql
