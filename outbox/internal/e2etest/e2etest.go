// Package e2etest runs the outbox and inbox end to end on a real broker
// and database, with faults: business transactions each add one event;
// two relays (one in this process, one a child process) publish them; a
// consumer child applies each event's effect through the inbox. During
// the run it kills relays after a publish and before its mark (a child
// with SIGKILL, and an in-process relay whose context is cancelled at
// that point), restarts and freezes the broker, kills the consumer after
// the effect committed and before the ack, and drops publish acks (a
// proxy that holds the broker's answers, then cuts the connection). It
// asserts that every event's effect was applied exactly once and that
// nothing is left unpublished, and reports the faults and duplicates.
//
// # The fault model
//
// Where the relay can be when something fails, and what must absorb it:
//
//	relay dies before publishing        claim rolls back, next relay publishes: no copy
//	relay's context ends during Publish  batch fails (ctx error), copies of what was stored:
//	                                     JetStream window / inbox (adapter tests: frozen broker)
//	relay dies after the acks, before    claim rolls back, batch published again: JetStream
//	  the mark commits                   drops the copies; RabbitMQ delivers them, the inbox
//	                                     absorbs them (child SIGKILL; in-process cancel)
//	the acks are lost (connection cut    publish fails, the broker has the batch: as above
//	  after the request was sent)        (proxy FreezeReplies + Cut)
//	the client library re-sends          nats.go retries only on "no responders" (nothing
//	                                     stored); amqp091-go never: the relay's re-publish is
//	                                     the retry, covered above
//	broker killed / frozen               publishes fail or time out (PublishTimeout), relays
//	                                     retry with backoff; acked messages survive (file
//	                                     store, persistent + durable queue)
//	consumer dies after commit, before   redelivery (AckWait / channel close), the inbox finds
//	  the ack                            the id: applied once (child SIGKILL)
//
// It is for the broker adapters' tests only (outbox/outboxnats,
// outbox/outboxamqp). CONCURKIT_E2E_EVENTS=10000 CONCURKIT_E2E_ROUNDS=3
// is the long run; CONCURKIT_E2E_BREAK=inbox must make it fail.
package e2etest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/testkit"
)

// Broker is what a run needs from a broker adapter's test.
type Broker interface {
	// Name names the broker in reports, e.g. "nats".
	Name() string
	// Start starts a throwaway broker for the test.
	Start(t testing.TB) *testkit.Proc
	// Setup creates the run's stream or queue on the broker at addr.
	Setup(ctx context.Context, addr string) error
	// Topic is the outbox topic of the run's events.
	Topic() string
	// Publisher returns a publisher connected to addr; dups (nil when the
	// broker does not deduplicate) reports how many publishes it dropped
	// as duplicates so far; stop releases the publisher.
	Publisher(ctx context.Context, addr string) (pub outbox.Publisher, dups func() int64, stop func(), err error)
	// Consume delivers the run's messages from addr to apply, through the
	// adapter's consumer helper (ack only after apply returned nil),
	// until ctx ends, reconnecting after the broker restarts.
	Consume(ctx context.Context, addr string, apply func(ctx context.Context, id string, body []byte) error) error
}

// Environment of a run and of its children.
const (
	// EnvEvents overrides the number of events (default DefaultEvents);
	// the long run is CONCURKIT_E2E_EVENTS=10000.
	EnvEvents = "CONCURKIT_E2E_EVENTS"
	// EnvRounds overrides how many times the fault schedule runs
	// (default 1).
	EnvRounds = "CONCURKIT_E2E_ROUNDS"

	// EnvBreak=inbox makes the consumer apply effects without the inbox:
	// the run must then fail (duplicates applied twice). It proves the
	// check can fail.
	EnvBreak = "CONCURKIT_E2E_BREAK"

	envRole  = "CONCURKIT_E2E_ROLE"
	envDB    = "CONCURKIT_E2E_DB"
	envDSN   = "CONCURKIT_E2E_DSN"
	envAddr  = "CONCURKIT_E2E_BROKER"
	envStop  = "CONCURKIT_E2E_STOP_AFTER"
	envTopic = "CONCURKIT_E2E_TOPIC"
)

// DefaultEvents is the CI-sized run.
const DefaultEvents = 1000

// relayConfig is every relay's: small batches (many claims, so faults
// land mid-run), quick polls, and a publish timeout that bounds a frozen
// broker's stall.
var relayConfig = &outbox.RelayConfig{
	BatchSize: 10, PollInterval: 50 * time.Millisecond, PublishTimeout: 5 * time.Second,
	RetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second,
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
