// Package idempotencypg keeps idempotency keys in PostgreSQL, through pgx
// v5: its Store is an idempotency.Store for idempotency.Middleware, Do and
// Reap, and an idempotency.TxStore[pgx.Tx] for DoPhases, whose phases
// write through the pgx.Tx they are given and commit with their recovery
// point.
//
// The table is concurkit_idempotency_keys, created by the toolkit
// migrations (migrations.Up, version 2). A claim is one statement (a 409
// is one indexed read that writes nothing); on sessions
// whose default isolation is REPEATABLE READ or SERIALIZABLE, a claim that
// races another fails with a serialization failure (40001) and is run
// again with a new snapshot, as are the fenced writes and the reaper's
// deletes, so concurrent duplicates get 409 there too, never 503; completing a
// key is one UPDATE; a phase is one transaction (pessimisticpg.InTx,
// retried on deadlocks and serialization failures) that updates the key
// row first, so a claim that would take the key over waits for the phase
// to end. Measured in BenchmarkMiddleware: a first request costs two round
// trips, a replay two. See package idempotency for the design.
//
// # Replication and failover
//
// A replay answers only with a response that is durable: before it
// returns a finished key, Claim takes a key-share lock on the row in a
// transaction of its own, whose commit waits for the WAL to be flushed
// and, with synchronous replication, for the synchronous standbys. Without
// it, a completion whose commit was still waiting for the standby when
// its session was terminated or its statement cancelled (PostgreSQL then
// commits it on the primary alone, with the warning "canceling wait for
// synchronous replication") could be replayed, and a failover would lose
// the response the client holds (TestReplayWaitsForStandby). That costs a
// replay one flushed commit. With an asynchronous standby nothing helps: a
// failover loses the keys it had not received, and their requests run
// again (chaos.PostgresFailover finds it); durabilitypg.Check reports such
// a standby at start-up.
//
// The package imports pgx and the standard library, nothing of the MySQL
// driver or the AWS SDK.
package idempotencypg
