// Package pessimistic takes locks before it writes: row locks
// (SELECT … FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE with wait, NOWAIT,
// SKIP LOCKED or a lock timeout), a SKIP LOCKED job-claiming helper for
// queue workers, and PostgreSQL advisory locks, all inside transaction
// closure helpers that roll back on error or panic and retry deadlock
// victims and serialization failures.
//
// PostgreSQL is reached through pgx v5; MariaDB (and MySQL 8, where noted)
// through database/sql with github.com/go-sql-driver/mysql.
package pessimistic
