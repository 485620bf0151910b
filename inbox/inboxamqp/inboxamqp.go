package inboxamqp

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/internal/handle"
)

// DefaultRetryDelay is Config.RetryDelay's default.
const DefaultRetryDelay = time.Second

// Channel is what Consume reads from: *amqp.Channel has it.
type Channel interface {
	ConsumeWithContext(ctx context.Context, queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp.Table) (<-chan amqp.Delivery, error)
}

var _ Channel = (*amqp.Channel)(nil)

// Handler applies one delivery: id is its inbox ID. It returns nil once
// the effects are committed (inboxpg.Handle or inboxmysql.Handle returned
// nil, processed or duplicate).
type Handler func(ctx context.Context, id string, d amqp.Delivery) error

// Config configures Consume. A nil *Config and the zero value mean: ID
// from message_id, RetryDelay DefaultRetryDelay, no dead-letter hook.
type Config struct {
	// ID returns the inbox ID of a delivery. Nil means d.MessageId. A
	// returned ID must satisfy inbox.ValidateID.
	ID func(d amqp.Delivery) string
	// RetryDelay is how long Consume waits before requeueing a delivery
	// whose handler failed (AMQP has no delayed requeue, and an immediate
	// one spins on a persistent failure). Default DefaultRetryDelay;
	// negative is bad input.
	RetryDelay time.Duration
	// DeadLetter receives a delivery without a valid ID and the reason
	// (matching inbox.ErrInvalidID); when it returns nil the delivery is
	// rejected without requeue. Nil: it is requeued after RetryDelay.
	DeadLetter func(ctx context.Context, d amqp.Delivery, reason error) error
	// Stats, when not nil, is updated as deliveries are handled.
	Stats *Stats
}

// Stats counts what Consume did; read the fields with Load.
type Stats struct {
	Acked        atomic.Int64 // handler returned nil, acknowledged
	Failed       atomic.Int64 // handler errors (requeued)
	Redelivered  atomic.Int64 // deliveries flagged redelivered among those handled
	DeadLettered atomic.Int64 // deliveries DeadLetter accepted
}

// ErrChannelClosed is returned (wrapped) by Consume when the deliveries
// stop because the channel or connection closed: reconnect and consume
// again.
var ErrChannelClosed = errors.New("inboxamqp: channel closed")

// Consume handles the deliveries of queue on ch, one at a time, with
// manual acknowledgements sent only after handle returned nil, until ctx
// ends (it returns ctx.Err()) or the channel closes (ErrChannelClosed).
// Set the channel's prefetch (ch.Qos) first; run one Consume per channel.
// Errors before any I/O, matching concurkit.ErrInvalidArgument: a nil or
// typed-nil ch, a nil handle, a negative RetryDelay.
func Consume(ctx context.Context, ch Channel, queue string, handleFn Handler, cfg *Config) error {
	if handle.IsNil(ch) || handleFn == nil {
		return fmt.Errorf("%w: inboxamqp: nil channel or handler", concurkit.ErrInvalidArgument)
	}
	var conf Config
	if cfg != nil {
		conf = *cfg
	}
	if conf.RetryDelay < 0 {
		return fmt.Errorf("%w: inboxamqp: negative RetryDelay %v", concurkit.ErrInvalidArgument, conf.RetryDelay)
	}
	if conf.RetryDelay == 0 {
		conf.RetryDelay = DefaultRetryDelay
	}
	if conf.ID == nil {
		conf.ID = func(d amqp.Delivery) string { return d.MessageId }
	}
	if conf.Stats == nil {
		conf.Stats = new(Stats)
	}
	deliveries, err := ch.ConsumeWithContext(ctx, queue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("inboxamqp: consume %q: %w", queue, err)
	}
	for {
		select {
		case <-ctx.Done():
			drain(deliveries)
			return ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w (queue %q)", ErrChannelClosed, queue)
			}
			handleOne(ctx, d, handleFn, &conf)
		}
	}
}

func handleOne(ctx context.Context, d amqp.Delivery, handleFn Handler, conf *Config) {
	if d.Redelivered {
		conf.Stats.Redelivered.Add(1)
	}
	id := conf.ID(d)
	if err := inbox.ValidateID("message id", id); err != nil {
		if conf.DeadLetter != nil && conf.DeadLetter(ctx, d, err) == nil {
			conf.Stats.DeadLettered.Add(1)
			_ = d.Reject(false)
			return
		}
		requeue(ctx, d, conf.RetryDelay)
		return
	}
	if err := handleFn(ctx, id, d); err != nil {
		conf.Stats.Failed.Add(1)
		requeue(ctx, d, conf.RetryDelay)
		return
	}
	// A lost ack leaves the delivery unacknowledged: requeued when the
	// channel closes, and absorbed by the inbox.
	_ = d.Ack(false)
	conf.Stats.Acked.Add(1)
}

// drainWait bounds how long Consume, once its context ended, waits for
// the client to finish cancelling the consumer.
const drainWait = 5 * time.Second

// drain requeues what is still delivered after the context ended, until
// the client closes deliveries (it does once the broker confirmed the
// cancel; ConsumeWithContext cancels when ctx ends). amqp091-go requires
// deliveries to be received: one left unreceived blocks the connection,
// and a Channel.Close racing the cancel hung for 10 minutes in
// TestAckOnlyAfterHandler. After drainWait (a frozen broker never
// confirms) the rest is drained in the background.
func drain(deliveries <-chan amqp.Delivery) {
	t := time.NewTimer(drainWait)
	defer t.Stop()
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			_ = d.Nack(false, true)
		case <-t.C:
			go func() {
				for d := range deliveries {
					_ = d.Nack(false, true)
				}
			}()
			return
		}
	}
}

// requeue gives d back after delay (at once when ctx ends).
func requeue(ctx context.Context, d amqp.Delivery, delay time.Duration) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	_ = d.Nack(false, true)
}
