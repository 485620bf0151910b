// Package inboxnats consumes a NATS JetStream pull consumer through an
// inbox: Consume hands each message and its ID (the Nats-Msg-Id header) to
// your handler, which applies the message's effects with inboxpg.Handle
// or inboxmysql.Handle, and acknowledges the message only after the
// handler returned nil — that is, after the inbox transaction committed.
//
//	err := inboxnats.Consume(ctx, consumer, func(ctx context.Context, id string, msg jetstream.Msg) error {
//		_, err := inboxpg.Handle(ctx, pool, "billing", id, func(ctx context.Context, tx pgx.Tx) error {
//			return apply(ctx, tx, msg.Data())
//		})
//		return err
//	}, nil)
//
// # Why acknowledge after the commit
//
// A consumer that dies after its transaction committed and before its ack
// reached the server gets the message again (after the consumer's
// AckWait); the inbox finds the ID and skips the effects, and the second
// delivery is acknowledged. Acknowledging first would lose the message
// when the consumer dies before the commit. So an ack is never sent for a
// message whose handler failed: it is negatively acknowledged with
// Config.NakDelay and redelivered (up to the consumer's MaxDeliver).
//
// The ID is the one outbox/outboxnats publishes with (the outbox message
// ID), so the inbox also absorbs a relay's re-publish that came after
// JetStream's duplicate window. Messages from other producers work the
// same when they set Nats-Msg-Id.
//
// # Placement
//
// This package lives under inbox because it is the consumer half: it
// needs only the NATS client and the inbox's ID rules, not the outbox,
// and it reads nothing but the standard Nats-Msg-Id header. It never
// links a database driver: your handler calls the inbox adapter of your
// database.
//
// # Messages without an ID
//
// A message without a valid Nats-Msg-Id (inbox.ValidateID) cannot be
// deduplicated. It goes to Config.DeadLetter; when that returns nil the
// message is terminated (never redelivered). Without DeadLetter it is
// negatively acknowledged with NakDelay like a failed handler: nothing
// is lost, and the consumer's MaxDeliver bounds the redeliveries.
//
// This package compiles the NATS client only.
package inboxnats
