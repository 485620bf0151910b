// Package inboxamqp consumes a RabbitMQ queue (AMQP 0-9-1,
// github.com/rabbitmq/amqp091-go) through an inbox: Consume hands each
// delivery and its ID (the message_id property) to your handler, which
// applies the message's effects with inboxpg.Handle or inboxmysql.Handle,
// and acknowledges the delivery (manual ack) only after the handler
// returned nil — after the inbox transaction committed.
//
//	ch.Qos(50, 0, false) // prefetch
//	err := inboxamqp.Consume(ctx, ch, "orders", func(ctx context.Context, id string, d amqp.Delivery) error {
//		_, err := inboxpg.Handle(ctx, pool, "billing", id, func(ctx context.Context, tx pgx.Tx) error {
//			return apply(ctx, tx, d.Body)
//		})
//		return err
//	}, nil)
//
// A consumer that dies after the commit and before its ack reached the
// broker leaves the delivery unacknowledged; RabbitMQ requeues it when the
// channel closes and the next delivery finds the ID in the inbox (the
// effects are skipped, the delivery acknowledged). A handler error
// requeues the delivery (Nack with requeue) after Config.RetryDelay.
// RabbitMQ does not deduplicate: a relay's re-publish (outbox/outboxamqp)
// is a second message with the same message_id, absorbed the same way.
//
// Consume returns when the channel or connection closes (a broker restart):
// reconnect and call it again. It lives under inbox, not outbox, because
// it is the consumer half and reads only the standard message_id; it
// never links a database driver.
//
// A delivery without a valid message_id (inbox.ValidateID) cannot be
// deduplicated: it goes to Config.DeadLetter and, when that returns nil,
// is rejected without requeue (to the queue's dead-letter exchange, if it
// has one). Without DeadLetter it is requeued after RetryDelay, like a
// failed handler.
//
// This package compiles the AMQP client only.
package inboxamqp
