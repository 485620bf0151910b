// Package outboxamqp publishes outbox messages to RabbitMQ (AMQP 0-9-1,
// github.com/rabbitmq/amqp091-go): a Publisher for outbox.Relay that
// returns only once the broker confirmed every message of the batch
// (publisher confirms), so the relay marks rows published only after
// RabbitMQ took responsibility for them.
//
//	dial := func(ctx context.Context) (*amqp.Connection, error) { return amqp.Dial(url) }
//	pub, err := outboxamqp.New(dial, &outboxamqp.Config{DeadLetter: keep})
//	defer pub.Close()
//	relay, err := outbox.NewRelay(store, pub, nil)
//
// # Confirms, mandatory, returns
//
// Every message is published persistent (delivery mode 2) with the
// mandatory flag, on a channel in confirm mode, with message_id = the
// outbox message's ID, timestamp = its CreatedAt, and its Headers as the
// header table (Key, when not empty, as KeyHeader). Publish waits for the
// broker's confirm of each one. A message the broker returns as
// unroutable (no queue bound for its routing key) fails the batch like a
// nack or a lost connection: it is published again later, as it may be
// routable then. RabbitMQ has no duplicate window: a relay's re-publish
// after a crash reaches the queue twice, and the consumer's inbox (see
// inbox/inboxamqp, which hands your handler message_id) absorbs it.
//
// # Routing
//
// Config.Route maps a message to an exchange and routing key; by default
// the default exchange ("") and the Topic, i.e. the queue named like the
// topic.
//
// # Messages that cannot be delivered
//
// A message RabbitMQ refuses for good is handed to Config.DeadLetter with
// a reason matching outbox.ErrRejected: one larger than the broker's
// max_message_size (the broker closes the channel with 406
// PRECONDITION_FAILED; Publish then publishes the unconfirmed messages one
// at a time to find it), an exchange or routing key longer than 255 bytes
// or a header name longer than 255 bytes (AMQP short strings: the client
// would send a broken frame), and a header named CC or BCC (RabbitMQ's
// sender-selected distribution would copy the message to the queues they
// name). A row whose headers could not be read (Message.Malformed) is
// handed over too (reason matching outbox.ErrMalformedRow). When
// DeadLetter returns nil the message counts as handled; without
// DeadLetter it fails its batch (retried with the relay's backoff).
//
// # Connections
//
// The Publisher dials with the Dialer it was given when it needs a
// connection, and again after the connection was lost (a broker restart):
// give it a plain connection (not amqp.Config.Recovery), it keeps one
// connection and a pool of confirm-mode channels, one per concurrent
// Publish. Close releases them.
//
// This package compiles the AMQP client only (no database driver).
package outboxamqp
