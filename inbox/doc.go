// Package inbox makes message handlers take effect exactly once although
// queues deliver at least once: a consumer records each message id in the
// same database transaction as the handler's effects, so a redelivered
// message finds its id and is skipped, and a handler that failed left no
// id behind and runs again.
//
// # Layout: one core, one adapter per driver family
//
// This package is the driver-neutral core (Config, Table, SeqResult,
// GapError, the sentinels, ValidateID); it imports only the standard
// library. The operations live in inbox/inboxpg (pgx v5) and
// inbox/inboxmysql (database/sql + go-sql-driver/mysql, MariaDB and
// MySQL), with the same names. The tables are created by the toolkit
// migrations (package migrations, version 3): concurkit_inbox and
// concurkit_inbox_sequences.
//
// # Message ids: Handle
//
//	processed, err := inboxpg.Handle(ctx, pool, "billing", msg.ID, func(ctx context.Context, tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, account)
//		return err
//	})
//
// Handle begins a transaction, inserts (consumer, message id) unless it is
// there — INSERT … ON CONFLICT DO NOTHING on PostgreSQL, INSERT … ON
// DUPLICATE KEY UPDATE with a LAST_INSERT_ID marker on MySQL — runs fn in
// the same transaction, and commits. A duplicate returns (false, nil)
// without running fn. Concurrent deliveries of one id wait on its key:
// exactly one runs fn's effects. Acknowledge the message to the transport
// when Handle returns nil (processed or duplicate); on an error, let it be
// redelivered: whatever happened, a redelivery is safe.
//
// The consumer name scopes ids: two services (or two handlers of one
// topic) that consume the same message each record it under their own
// name. Effects outside the transaction (an e-mail, an HTTP call) are not
// covered: give them an idempotency key derived from the message id.
//
// # Dedup window: Config.Window
//
// By default ids are remembered forever. With a Window (SQS FIFO uses five
// minutes) an id recorded at least Window ago is processed again, and
// Reap deletes such entries in batches: storage stays bounded, at the
// price that a redelivery later than Window applies its effects twice.
// Time comes from Config.Now (time.Now by default; tests inject a clock).
//
// # Producer sequences: HandleSequence
//
// When producers number their messages (1, 2, 3, … per producer id, like
// Kafka's idempotent producer), HandleSequence keeps the highest sequence
// applied per (consumer, producer) instead of every id: constant storage
// per producer, and order. A message at or below it is a duplicate and
// dropped; the next one is applied; one further ahead reveals a gap,
// reported as a *GapError naming the missing range. Config.Gaps chooses
// between refusing it (RefuseGaps, the default, like Kafka's
// OutOfOrderSequence: the message is redelivered after the missing ones,
// so effects are applied in order and none is skipped) and applying it
// anyway while reporting the gap (ApplyGaps, for transports that keep
// order, where a gap means loss; a late message is then dropped).
//
// # End to end with package outbox
//
// A producer writes its events in its business transaction
// (outboxpg.Add); relays publish them at least once (outbox.Relay); the
// consumer handles each with Handle on the event's ID. Duplicates that the
// relay produces after a crash are absorbed here: effectively once, end to
// end. inbox/inboxnats (a JetStream pull consumer) and inbox/inboxamqp
// (a RabbitMQ queue) run that consumer loop: they hand your handler the
// message's ID (Nats-Msg-Id, message_id) and acknowledge the message only
// after the handler — and so the inbox transaction — returned nil.
//
// # Errors
//
// Bad input is reported before any I/O: ErrInvalidID for an empty,
// over-long (more than MaxIDLength bytes), non-UTF-8 or NUL-containing
// consumer, message or producer id, and concurkit.ErrInvalidArgument for
// the rest (nil handles or functions, sequences below 1, negative
// durations, bad table names). ErrSequenceGap matches every *GapError.
// Transaction errors are pessimistic's (deadlock victims and serialization
// failures are retried), and *concurkit.AmbiguousCommitError reports a
// COMMIT whose outcome is unknown.
package inbox
