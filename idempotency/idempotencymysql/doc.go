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
package idempotencymysql
