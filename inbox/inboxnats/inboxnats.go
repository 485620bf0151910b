package inboxnats

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/internal/handle"
)

// DefaultNakDelay is Config.NakDelay's default.
const DefaultNakDelay = time.Second

// Consumer is what Consume reads from: jetstream.Consumer (a pull
// consumer, from Stream.CreateOrUpdateConsumer or JetStream.Consumer) has
// it.
type Consumer interface {
	Messages(opts ...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error)
}

var _ Consumer = jetstream.Consumer(nil)

// Handler applies one message: id is its inbox ID. It returns nil once
// the message's effects are committed (inboxpg.Handle or
// inboxmysql.Handle returned nil, whether processed or a duplicate).
type Handler func(ctx context.Context, id string, msg jetstream.Msg) error

// Config configures Consume. A nil *Config and the zero value mean: ID
// from the Nats-Msg-Id header, NakDelay DefaultNakDelay, no dead-letter
// hook, the client's default pull options.
type Config struct {
	// ID returns the inbox ID of a message. Nil means its Nats-Msg-Id
	// header. A returned ID must satisfy inbox.ValidateID.
	ID func(msg jetstream.Msg) string
	// NakDelay is how long the server waits before redelivering a message
	// whose handler failed. Default DefaultNakDelay; negative is bad
	// input.
	NakDelay time.Duration
	// DeadLetter receives a message without a valid ID and the reason
	// (matching inbox.ErrInvalidID); when it returns nil the message is
	// terminated. Nil: the message is negatively acknowledged with
	// NakDelay (redelivered up to the consumer's MaxDeliver).
	DeadLetter func(ctx context.Context, msg jetstream.Msg, reason error) error
	// Pull are the options of the pull subscription (Consumer.Messages),
	// e.g. jetstream.PullMaxMessages. Nil means the client's defaults.
	Pull []jetstream.PullMessagesOpt
	// Stats, when not nil, is updated as messages are handled.
	Stats *Stats
}

// Stats counts what Consume did. Its fields are updated atomically; read
// them with Load.
type Stats struct {
	// Acked counts messages whose handler returned nil (acknowledged).
	Acked atomic.Int64
	// Failed counts handler errors (negatively acknowledged).
	Failed atomic.Int64
	// Redelivered counts messages delivered more than once (their
	// metadata's NumDelivered > 1) among those handled.
	Redelivered atomic.Int64
	// DeadLettered counts messages DeadLetter accepted.
	DeadLettered atomic.Int64
}

// Consume handles messages of c, one at a time, until ctx ends or the
// subscription fails for good, acknowledging each only after handle
// returned nil (see the package doc). Run several Consume calls on one
// consumer for parallelism. It returns ctx.Err() when ctx ends;
// otherwise the subscription's error (the consumer was deleted, the
// connection was closed), wrapped. A handler error never stops it.
//
// Errors before any I/O, matching concurkit.ErrInvalidArgument: a nil or
// typed-nil c, a nil handle, a negative NakDelay.
func Consume(ctx context.Context, c Consumer, handle Handler, cfg *Config) error {
	if handle == nil || isNil(c) {
		return fmt.Errorf("%w: inboxnats: nil consumer or handler", concurkit.ErrInvalidArgument)
	}
	var conf Config
	if cfg != nil {
		conf = *cfg
	}
	if conf.NakDelay < 0 {
		return fmt.Errorf("%w: inboxnats: negative NakDelay %v", concurkit.ErrInvalidArgument, conf.NakDelay)
	}
	if conf.NakDelay == 0 {
		conf.NakDelay = DefaultNakDelay
	}
	if conf.ID == nil {
		conf.ID = func(m jetstream.Msg) string { return m.Headers().Get(jetstream.MsgIDHeader) }
	}
	if conf.Stats == nil {
		conf.Stats = new(Stats)
	}
	it, err := c.Messages(conf.Pull...)
	if err != nil {
		return fmt.Errorf("inboxnats: subscribe: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if ctx.Err() != nil {
			if msg != nil {
				_ = msg.Nak() // not handled: redeliver at once, to another consumer
			}
			return ctx.Err()
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
				errors.Is(err, jetstream.ErrConnectionClosed) {
				return fmt.Errorf("inboxnats: next message: %w", err)
			}
			// Heartbeats missed while reconnecting: the iterator recovers.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		handleOne(ctx, msg, handle, &conf)
	}
}

func handleOne(ctx context.Context, msg jetstream.Msg, handle Handler, conf *Config) {
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 1 {
		conf.Stats.Redelivered.Add(1)
	}
	id := conf.ID(msg)
	if err := inbox.ValidateID("message id", id); err != nil {
		if conf.DeadLetter != nil && conf.DeadLetter(ctx, msg, err) == nil {
			conf.Stats.DeadLettered.Add(1)
			_ = msg.Term()
			return
		}
		_ = msg.NakWithDelay(conf.NakDelay)
		return
	}
	if err := handle(ctx, id, msg); err != nil {
		conf.Stats.Failed.Add(1)
		if ctx.Err() != nil {
			_ = msg.Nak()
			return
		}
		_ = msg.NakWithDelay(conf.NakDelay)
		return
	}
	// A lost ack is redelivered after AckWait and absorbed by the inbox.
	_ = msg.Ack()
	conf.Stats.Acked.Add(1)
}

func isNil(c Consumer) bool { return handle.IsNil(c) }
