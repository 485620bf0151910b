// Package outboxmysql is the MariaDB/MySQL (database/sql and
// github.com/go-sql-driver/mysql) adapter of package outbox: Add writes a
// message in the business transaction, and *Store is the outbox.Source a
// Relay claims batches from (FOR UPDATE SKIP LOCKED, MariaDB 10.6+ or
// MySQL 8, in a READ COMMITTED transaction held while the publisher runs,
// so that producers' inserts never wait on the relay's gap locks), with
// Reap for published rows and Pending for the backlog. The table
// concurkit_outbox is created by the toolkit migrations. Types and
// semantics are the core's: see package outbox. This package never links
// pgx or the AWS SDK.
package outboxmysql
