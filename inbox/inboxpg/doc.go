// Package inboxpg is the PostgreSQL (pgx v5) adapter of package inbox:
// Handle runs a handler once per (consumer, message id), recording the id
// in the handler's transaction; HandleSequence applies messages of one
// producer once each and in sequence order; Reap deletes ids older than
// the dedup window.
//
// The transactions run through pessimisticpg.InTx: on a pool or
// connection they are retried on deadlocks and serialization failures; on
// a pgx.Tx the caller opened they run once in a savepoint. The tables
// (concurkit_inbox, concurkit_inbox_sequences) are created by the toolkit
// migrations. Types, sentinels and semantics are the core's: see package
// inbox. This package never links the MySQL driver or the AWS SDK.
//
// A duplicate is reported only once its record is durable — on disk and,
// with synchronous replication, on the synchronous standbys: Handle locks
// the recorded id and commits (HandleSequence commits its lock of the
// producer's row), and that commit waits. A record whose own commit was
// cut short while waiting for the standby (its session terminated, its
// statement cancelled) is visible on the primary alone; calling a
// redelivery of it a duplicate let the transport drop a message that a
// failover then lost (TestDuplicateWaitsForStandby). With an asynchronous
// standby a failover loses recent records whatever the inbox does, and
// their messages are handled again: durabilitypg.Check reports it.
package inboxpg
