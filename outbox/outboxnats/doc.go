// Package outboxnats publishes outbox messages to NATS JetStream: a
// Publisher for outbox.Relay (the relay's Claim marks a batch published
// only after Publish returned, and Publish returns only after JetStream
// acknowledged every message of the batch as stored).
//
//	js, err := jetstream.New(nc)
//	pub, err := outboxnats.New(js, &outboxnats.Config{DeadLetter: keep})
//	relay, err := outbox.NewRelay(store, pub, nil) // store: outboxpg or outboxmysql
//	err = relay.Run(ctx)
//
// # Exactly once, end to end
//
// Each message is published with the Nats-Msg-Id header set to the outbox
// message's ID. A relay that published a batch and died before marking it
// published (crash, lost database connection, a lost publish ack) leaves
// the batch claimable, and the next relay publishes it again: within the
// stream's duplicate window (StreamConfig.Duplicates, 2 minutes by
// default) JetStream drops the copy and acknowledges it as a duplicate
// (counted in Stats().Duplicates). A copy later than the window is stored
// again, and a consumer's inbox absorbs it: consume with
// inbox/inboxnats, which hands your handler the same ID for
// inboxpg.Handle or inboxmysql.Handle and acknowledges only after the
// handler's transaction committed.
//
// # Mapping
//
// The subject is Config.Subject(msg) (the message's Topic by default);
// the payload is the body; Message.Headers become NATS headers; Key, when
// not empty, is the KeyHeader header; ID is the Nats-Msg-Id header.
//
// # Messages that cannot be delivered
//
// A message JetStream or the client refuses for good is handed to
// Config.DeadLetter with a reason matching outbox.ErrRejected: a payload
// above the server's max_payload or the stream's MaxMsgSize; a subject
// that is not a valid NATS publish subject (empty tokens, whitespace,
// wildcards) or that addresses the server's own API (a first token
// starting with "$", as in $JS.API.…: a topic must never become an API
// call); a header name that NATS cannot carry or that starts with
// "Nats-" (those headers steer JetStream: Nats-Rollup purges a subject,
// Nats-Expected-* changes what is accepted), a header value with CR, LF
// or surrounding spaces (NATS would alter it), and a header named like
// KeyHeader. A row whose headers could not be read (Message.Malformed) is
// handed over too, with that reason (matching outbox.ErrMalformedRow).
// When DeadLetter returns nil the message counts as handled and its row
// is marked published with its batch. Without DeadLetter such a message
// fails its batch, which is retried with the relay's backoff: nothing is
// lost, but the batch does not get through until someone fixes the row,
// so set DeadLetter in production.
//
// A subject that no stream captures is not a rejection (JetStream answers
// "no responders", as it also does while restarting): the batch fails
// and is retried.
//
// # Acknowledgements and their timeouts
//
// Publish sends the batch with PublishMsgAsync and waits for every ack or
// for its context (RelayConfig.PublishTimeout): a batch with a missing ack
// fails and is published again (JetStream drops the copies it stored).
// nats.go resolves pending acks with an error when the connection is
// lost, but an ack that never comes on a live connection stays pending in
// the client until jetstream.WithPublishAsyncTimeout: set it (to about the
// relay's PublishTimeout) on the JetStream handle you give New.
//
// This package compiles the NATS client only (no database driver).
package outboxnats
