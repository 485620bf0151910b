// Package idempotencymysql keeps idempotency keys in MariaDB or MySQL
// (InnoDB), through database/sql and github.com/go-sql-driver/mysql: its
// Store is an idempotency.Store for idempotency.Middleware, Do and Reap,
// and an idempotency.TxStore[*sql.Tx] for DoPhases, whose phases write
// through the *sql.Tx they are given and commit with their recovery
// point.
//
// The table is concurkit_idempotency_keys, created by the toolkit
// migrations (migrations.Up, version 2); keys, principals and recovery
// points are VARBINARY (compared byte for byte, not by a case-insensitive
// collation) and times DATETIME(6) in UTC. A claim is INSERT … ON
// DUPLICATE KEY UPDATE with conditional assignments, correct whatever the
// session's sql_mode (MariaDB's SIMULTANEOUS_ASSIGNMENT included), plus a
// read by primary key (two round trips); writes that the caller's context
// interrupts are stopped on the server (KILL QUERY) through the *sql.DB.
// A response whose statement would exceed the server's max_allowed_packet
// (counted twice: escaped values may double) is refused with
// idempotency.ErrResponseTooLarge before it is sent, and the key keeps a
// marker instead. The store works with any DSN options (parseTime, loc, clientFoundRows,
// interpolateParams): times are sent as text of the UTC wall clock, so the
// driver's conversion to loc never applies. See package idempotency for the design.
//
// The package imports the MySQL driver and the standard library, nothing
// of pgx or the AWS SDK.
//
// # Galera
//
// On a MariaDB Galera cluster whose nodes all take the store's statements
// (a pool spread over them, a round-robin proxy) the guarantees hold
// across nodes: of concurrent claims of a key on different nodes exactly
// one runs — locks do not hold back a claim on another node, but of the
// claims' write sets the first certified wins and the others fail with
// 1213, a definite failure (nothing was written) that Claim runs again and
// that then finds the key claimed (409) — and every client gets the one
// stored response or 409. The store asks the server once whether it is a
// Galera node (@@wsrep_on) and, if so, makes the claim, the read after it,
// Complete and Release wait (SET STATEMENT wsrep_sync_wait) until their
// node has applied what the cluster committed before them, and runs each
// phase of DoPhases on a connection that first waited so: without the
// wait a node that had not yet applied the claim made on another node
// answered 409 to the claimant itself, refused its completion (the work
// done, the result not stored, the key run again after LockTimeout) or a
// phase (ErrLockLost), and a retry after the result was stored got 409.
// Complete and Release, autocommit statements, are run again after a 1213.
// Nothing needs to be set on the sessions; the waits cost one round trip
// between nodes each.
package idempotencymysql
