// Package inboxmysql is the MariaDB/MySQL (database/sql and
// github.com/go-sql-driver/mysql) adapter of package inbox: Handle runs a
// handler once per (consumer, message id), recording the id in the
// handler's transaction; HandleSequence applies messages of one producer
// once each and in sequence order; Reap deletes ids older than the dedup
// window.
//
// The transactions run through pessimisticmysql.InTx: on a *sql.DB or
// *sql.Conn they are retried on deadlocks; on a *sql.Tx the caller opened
// they run once inside it, in a savepoint (as inboxpg does): a handler that
// fails or panics is rolled back to it, so the id is not recorded even if
// the caller commits, and the redelivery runs the handler. Whether an id was new is read from the
// statement's last-insert-id marker, not from the affected-rows count, so
// the DSN's clientFoundRows setting does not matter. That marker is the
// session's LAST_INSERT_ID(): after a duplicate (fn not run) it is 2^64-1,
// and after HandleSequence on a known producer it is the producer's last
// sequence, on the handler's connection, before fn runs. A handler that
// needs LAST_INSERT_ID() reads it after its own INSERT, as MySQL code
// must anyway; the value from before Handle is not kept. The tables
// (concurkit_inbox, concurkit_inbox_sequences; ids are VARBINARY, compared
// byte for byte) are created by the toolkit migrations. Types, sentinels
// and semantics are the core's: see package inbox. This package never
// links pgx or the AWS SDK.
//
// # Galera
//
// On a MariaDB Galera cluster whose nodes all take deliveries, a message
// is still handled exactly once: deliveries of one id on different nodes
// do not wait on each other's key (locks are node-local) and may all run
// fn, but of their transactions only the first to commit is certified;
// the others fail with 1213 at COMMIT (or are aborted by the winner's
// applier), a definite failure — nothing of theirs committed — and the
// transaction run again (pessimisticmysql.InTx) finds the id: a
// duplicate. fn may thus run on several nodes; its effects commit once.
// HandleSequence asks once whether the server is a Galera node
// (@@wsrep_on) and, if so, begins each transaction on a connection that
// first waited (wsrep_sync_wait) until its node applied what the cluster
// committed before: a node that had not yet applied a producer's last
// sequence refused the next one as a gap. Nothing needs to be set on the
// sessions. In a *sql.Tx the caller opened, that wait is the caller's
// (SET SESSION wsrep_sync_wait = 1 before BEGIN).
package inboxmysql
