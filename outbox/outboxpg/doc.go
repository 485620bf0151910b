// Package outboxpg is the PostgreSQL (pgx v5) adapter of package outbox:
// Add writes a message in the business transaction, and *Store is the
// outbox.Source a Relay claims batches from (FOR UPDATE SKIP LOCKED, in a
// transaction held while the publisher runs), with Reap for published
// rows and Pending for the backlog. The table concurkit_outbox is created
// by the toolkit migrations. Types and semantics are the core's: see
// package outbox. This package never links the MySQL driver or the AWS
// SDK.
package outboxpg
