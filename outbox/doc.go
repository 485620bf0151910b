// Package outbox publishes events that a database transaction produced,
// at least once and only if the transaction committed: the transactional
// outbox. The producer writes the event into an outbox table inside its
// business transaction (the adapters' Add); a Relay claims unpublished
// rows, hands them to a Publisher (a broker, a queue, webhooks) and marks
// them published only after the publisher returned nil.
//
// # Layout: one core, one adapter per driver family
//
// This package is the driver-neutral core — Message, Publisher, Source,
// Relay, Config — and imports only the standard library. The storage
// lives in outbox/outboxpg (pgx v5) and outbox/outboxmysql (database/sql
// + go-sql-driver/mysql, MariaDB 10.6+ and MySQL 8), whose *Store is a
// Source. The table concurkit_outbox is created by the toolkit migrations
// (package migrations, version 3).
//
//	// in the business transaction
//	id, err := outboxpg.Add(ctx, tx, outbox.Message{Topic: "orders", Key: orderID, Payload: body})
//
//	// in one or more relay processes
//	store, err := outboxpg.New(pool, nil)
//	relay, err := outbox.NewRelay(store, publisher, nil)
//	err = relay.Run(ctx)
//
// # Publishers for brokers
//
// outbox/outboxnats publishes to NATS JetStream (Nats-Msg-Id = the
// message ID, so JetStream's duplicate window drops a relay's re-publish)
// and outbox/outboxamqp to RabbitMQ (publisher confirms, mandatory); both
// return only once the broker acknowledged the whole batch, and hand the
// messages the broker refuses for good (ErrRejected) and malformed rows
// to a DeadLetterFunc instead of failing the batch forever. Their tests
// run the whole chain — business transaction, outbox, two relays, broker,
// inbox — on PostgreSQL and MariaDB with relays, brokers and consumers
// killed mid-flight.
//
// # Claiming: SKIP LOCKED, released with the transaction
//
// A claim is one transaction: SELECT … WHERE published_at IS NULL ORDER
// BY id LIMIT n FOR UPDATE SKIP LOCKED, then the publisher, then UPDATE …
// SET published_at, then COMMIT. The rows stay locked while the publisher
// runs, so concurrent relays take disjoint batches and, in the normal
// case, no row is published twice. A relay that crashes, is cancelled or
// loses its connection mid-batch holds no claim afterwards: the server
// rolls its transaction back and the rows are claimable at once — no
// lease to expire, nothing lost. The cost is a transaction (and a
// connection) held open for the duration of a publish:
// RelayConfig.PublishTimeout bounds it.
//
// # At least once, effectively once
//
// A batch the publisher sent but whose mark did not commit (crash,
// killed connection, failed COMMIT, a publisher error after some messages
// went out) is published again. Every message carries an ID (a UUIDv7
// unless the producer sets one) for the consumer to deduplicate on with
// package inbox (inboxpg.Handle(ctx, db, consumer, msg.ID, fn)): producer
// outbox plus consumer inbox give each event's effects exactly once, end
// to end.
//
// # Order
//
// Rows are claimed in id (insertion) order, but batches can fail and be
// retried after later ones, and several relays publish in parallel: the
// outbox does not promise order. Run a single relay for order per outbox,
// or number messages per producer and apply them with
// inbox HandleSequence.
//
// # Rows the relay cannot read
//
// Add stores only what every adapter reads back unchanged (Validate). A
// row written by other code (raw SQL, another language) may not be: when
// its headers are not a JSON object of strings, Claim does not fail —
// which would stop every relay on that row for good — but hands the
// message to the publisher with Message.Malformed set (a *MalformedError
// matching ErrMalformedRow, with the stored bytes) and Headers nil. The
// publisher publishes it as it is or dead-letters it, and returns nil:
// the row is then marked published with its batch.
//
// # Housekeeping
//
// Published rows are kept for Config.Retention (24 h by default) and then
// deleted by the adapters' Reap, in batches; Pending counts the backlog.
//
// # Errors
//
// Bad input is reported before any I/O: ErrInvalidMessage for a message
// that cannot be stored unchanged (empty topic, invalid ID, over-long
// topic, key or headers, NUL or invalid UTF-8 in the topic, key or
// headers) — so a bad message never aborts the caller's business
// transaction, as a failed INSERT does on PostgreSQL — and
// concurkit.ErrInvalidArgument for the rest (nil handles, publishers
// or sources, batch sizes outside [1, MaxBatchSize], negative durations,
// bad table names). A Relay's Run never gives up on errors: it backs off
// and reports each failed batch to the observe hooks as a retry.
package outbox
