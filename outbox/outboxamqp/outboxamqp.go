package outboxamqp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/outbox"
)

// KeyHeader is the header that carries outbox.Message.Key (absent when
// the key is empty).
const KeyHeader = "outbox-key"

// Dialer opens a connection to the broker, e.g.
// func(ctx context.Context) (*amqp.Connection, error) { return amqp.Dial(url) }.
type Dialer func(ctx context.Context) (*amqp.Connection, error)

// Config configures a Publisher. A nil *Config and the zero value mean:
// the default exchange with the Topic as routing key, no dead-letter
// hook. New copies it.
type Config struct {
	// Route returns the exchange and routing key of a message. Nil means
	// ("", msg.Topic): the default exchange, which routes to the queue
	// named msg.Topic.
	Route func(msg outbox.Message) (exchange, key string)
	// DeadLetter receives the messages that cannot be delivered intact
	// (see the package doc); when it returns nil they count as handled.
	// It may be called again for a message whose batch is retried: key
	// what it stores on msg.ID. Nil means such a message fails its batch
	// (an error matching outbox.ErrRejected or outbox.ErrMalformedRow).
	DeadLetter outbox.DeadLetterFunc
}

// Stats counts what a Publisher's confirms said, since New.
type Stats struct {
	// Confirmed is the number of messages the broker confirmed.
	Confirmed int64
	// Returned is the number of messages the broker returned as
	// unroutable (each failed its batch).
	Returned int64
	// DeadLettered is the number of messages DeadLetter accepted.
	DeadLettered int64
}

// Publisher publishes outbox batches to RabbitMQ with publisher confirms;
// it is an outbox.Publisher. Build it with New and Close it when done; it
// is safe for concurrent use.
type Publisher struct {
	dial       Dialer
	route      func(outbox.Message) (string, string)
	deadLetter outbox.DeadLetterFunc

	mu     sync.Mutex
	conn   *amqp.Connection
	idle   []*channel
	closed bool

	confirmed, returned, deadLettered atomic.Int64
}

var _ outbox.Publisher = (*Publisher)(nil)

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("outboxamqp: publisher closed")

// New returns a Publisher that connects with dial, configured by cfg
// (nil = defaults). It does no I/O. Errors, matching
// concurkit.ErrInvalidArgument: a nil dial.
func New(dial Dialer, cfg *Config) (*Publisher, error) {
	if dial == nil {
		return nil, fmt.Errorf("%w: outboxamqp: nil Dialer", concurkit.ErrInvalidArgument)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Route == nil {
		c.Route = func(m outbox.Message) (string, string) { return "", m.Topic }
	}
	return &Publisher{dial: dial, route: c.Route, deadLetter: c.DeadLetter}, nil
}

// Stats returns the counts so far.
func (p *Publisher) Stats() Stats {
	return Stats{Confirmed: p.confirmed.Load(), Returned: p.returned.Load(), DeadLettered: p.deadLettered.Load()}
}

// Close closes the Publisher's channels and connection. Publish calls in
// flight fail; later ones return ErrClosed.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		_ = c.ch.Close()
	}
	p.idle = nil
	if p.conn != nil {
		err := p.conn.Close()
		p.conn = nil
		if err != nil && !errors.Is(err, amqp.ErrClosed) {
			return fmt.Errorf("outboxamqp: close: %w", err)
		}
	}
	return nil
}

// channel is a confirm-mode channel with its return and close
// notifications.
type channel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
}

// get returns an idle channel or opens one, dialling when there is no
// live connection.
func (p *Publisher) get(ctx context.Context) (*channel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !c.ch.IsClosed() {
			return c, nil
		}
	}
	if p.conn == nil || p.conn.IsClosed() {
		conn, err := p.dial(ctx)
		if err != nil {
			return nil, fmt.Errorf("outboxamqp: dial: %w", err)
		}
		p.conn = conn
	}
	// Opening a channel waits for the broker's answer without a context:
	// on a frozen broker that is until the connection's heartbeat fails.
	conn := p.conn
	res := make(chan opened, 1)
	go func() { res <- open(conn) }()
	select {
	case r := <-res:
		return r.c, r.err
	case <-ctx.Done():
		go func() { // abandoned: close it when it comes
			if r := <-res; r.c != nil {
				_ = r.c.ch.Close()
			}
		}()
		return nil, errors.Join(errors.New("outboxamqp: open channel"), ctx.Err())
	}
}

type opened struct {
	c   *channel
	err error
}

// open opens a confirm-mode channel on conn.
func open(conn *amqp.Connection) opened {
	ch, err := conn.Channel()
	if err != nil {
		return opened{err: fmt.Errorf("outboxamqp: open channel: %w", err)}
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return opened{err: fmt.Errorf("outboxamqp: confirm mode: %w", err)}
	}
	c := &channel{ch: ch, returns: make(chan amqp.Return, 64), closes: make(chan *amqp.Error, 1)}
	ch.NotifyReturn(c.returns)
	ch.NotifyClose(c.closes)
	return opened{c: c}
}

// put gives a healthy channel back to the pool and closes another.
func (p *Publisher) put(c *channel, healthy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if healthy && !p.closed && !c.ch.IsClosed() {
		p.idle = append(p.idle, c)
		return
	}
	// Close waits for the broker's answer (without a context): never in
	// the caller's time, which a frozen broker would stretch by the
	// heartbeat timeout.
	go func() { _ = c.ch.Close() }()
}

// item is one message ready to publish.
type item struct {
	msg           outbox.Message
	exchange, key string
	pub           amqp.Publishing
}

type rejected struct {
	msg    outbox.Message
	reason error
}

// Publish implements outbox.Publisher: it publishes the batch on one
// confirm-mode channel and returns nil once the broker confirmed every
// message (none returned as unroutable) and DeadLetter accepted each one
// that cannot be delivered.
//
// Errors: the dial, channel, publish or confirm error (a nack, a closed
// channel or connection), an unroutable message (*amqp.Return's reply
// text, wrapped), each with the message's ID; an error matching
// outbox.ErrRejected or outbox.ErrMalformedRow for an undeliverable
// message when DeadLetter is nil; DeadLetter's own error;
// errors.Join(the count still unconfirmed, ctx.Err()) when ctx ends
// first; ErrClosed after Close. The batch is then published again later.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	if err := ctx.Err(); err != nil { // before a dial or a channel
		return errors.Join(fmt.Errorf("outboxamqp: %d messages not published", len(msgs)), err)
	}
	var bad []rejected
	items := make([]item, 0, len(msgs))
	for _, m := range msgs {
		it, err := p.item(m)
		if err != nil {
			bad = append(bad, rejected{m, err})
			continue
		}
		items = append(items, it)
	}
	if len(items) > 0 {
		confirmed, err := p.publish(ctx, items)
		if errors.Is(err, errTooLarge) {
			// The channel died at a message the broker refused: find
			// which, publishing the unconfirmed ones one at a time.
			for i, it := range items {
				if confirmed[i] {
					continue
				}
				if _, err := p.publish(ctx, items[i:i+1]); errors.Is(err, errTooLarge) {
					bad = append(bad, rejected{it.msg, fmt.Errorf("%w: %w", outbox.ErrRejected, err)})
				} else if err != nil {
					return err
				}
			}
		} else if err != nil {
			return err
		}
	}
	for _, r := range bad {
		if p.deadLetter == nil {
			return fmt.Errorf("outboxamqp: message %s (topic %q) cannot be delivered and Config.DeadLetter is nil: %w", r.msg.ID, r.msg.Topic, r.reason)
		}
		if err := p.deadLetter(ctx, r.msg, r.reason); err != nil {
			return fmt.Errorf("outboxamqp: dead-letter %s: %w", r.msg.ID, err)
		}
		p.deadLettered.Add(1)
	}
	return nil
}

// closeReasonWait bounds the wait for a closed channel's reason.
const closeReasonWait = time.Second

// errTooLarge marks a channel closed by the broker with 406
// PRECONDITION_FAILED during a publish: the message broke a limit of the
// broker (max_message_size).
var errTooLarge = errors.New("outboxamqp: broker refused a message (406 PRECONDITION_FAILED)")

// publish sends items on one channel and waits for their confirms. It
// reports which were confirmed (for the 406 search).
func (p *Publisher) publish(ctx context.Context, items []item) (confirmed []bool, err error) {
	confirmed = make([]bool, len(items))
	c, err := p.get(ctx)
	if err != nil {
		return confirmed, err
	}
	healthy := false
	defer func() { p.put(c, healthy) }()
	dcs := make([]*amqp.DeferredConfirmation, len(items))
	for i, it := range items {
		dcs[i], err = c.ch.PublishWithDeferredConfirmWithContext(ctx, it.exchange, it.key, true, false, it.pub)
		if err != nil {
			return confirmed, c.failure(it, fmt.Errorf("publish: %w", err))
		}
	}
	returned := map[string]amqp.Return{}
	for i, dc := range dcs {
	wait:
		for {
			select {
			case r := <-c.returns:
				returned[r.MessageId] = r
			case <-dc.Done():
				break wait
			case <-ctx.Done():
				// Confirms may still come for this channel: never reuse it.
				return confirmed, errors.Join(fmt.Errorf("outboxamqp: %d of %d messages not confirmed", len(items)-i, len(items)), ctx.Err())
			}
		}
		if !dc.Acked() {
			return confirmed, c.failure(items[i], errors.New("not confirmed (nack or channel closed)"))
		}
		confirmed[i] = true
		p.confirmed.Add(1)
	}
	// The broker sends a message's return before its confirm: every return
	// of this batch is in c.returns by now.
	for drained := false; !drained; {
		select {
		case r := <-c.returns:
			returned[r.MessageId] = r
		default:
			drained = true
		}
	}
	for i, it := range items {
		if r, ok := returned[it.msg.ID]; ok {
			confirmed[i] = false
			p.returned.Add(1)
			healthy = true
			return confirmed, fmt.Errorf("outboxamqp: message %s returned unroutable by exchange %q, routing key %q: %d %s",
				it.msg.ID, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText)
		}
	}
	healthy = true
	return confirmed, nil
}

// failure says why a publish on c failed: the channel's close error
// when the broker closed it (errTooLarge for 406), else err.
func (c *channel) failure(it item, err error) error {
	var closeErr *amqp.Error
	select {
	case closeErr = <-c.closes:
	default:
		// amqp091-go marks a channel the broker closed as closed before
		// it delivers the broker's reason to NotifyClose: a publish in
		// that window fails with 504 "channel/connection is not open".
		// The reason (406 for a too-large message) follows at once.
		var e *amqp.Error
		if errors.Is(err, amqp.ErrClosed) || errors.As(err, &e) && e.Code == amqp.ChannelError {
			t := time.NewTimer(closeReasonWait)
			select {
			case closeErr = <-c.closes: // nil if the channel closed without a reason
			case <-t.C:
			}
			t.Stop()
		}
	}
	if closeErr == nil {
		var e *amqp.Error
		if errors.As(err, &e) {
			closeErr = e
		}
	}
	if closeErr != nil && closeErr.Code == amqp.PreconditionFailed {
		return fmt.Errorf("%w: %s", errTooLarge, closeErr.Reason)
	}
	if closeErr != nil {
		return fmt.Errorf("outboxamqp: publish %s: channel closed: %w", it.msg.ID, closeErr)
	}
	return fmt.Errorf("outboxamqp: publish %s: %w", it.msg.ID, err)
}

// item maps m to a publishing, or returns why it cannot be delivered
// intact (an error matching outbox.ErrRejected or outbox.ErrMalformedRow).
func (p *Publisher) item(m outbox.Message) (item, error) {
	if m.Malformed != nil {
		return item{}, m.Malformed
	}
	exchange, key := p.route(m)
	if len(exchange) > 255 || len(key) > 255 {
		return item{}, fmt.Errorf("%w: exchange %q or routing key %q longer than 255 bytes", outbox.ErrRejected, exchange, key)
	}
	var h amqp.Table
	if len(m.Headers) > 0 || m.Key != "" {
		h = make(amqp.Table, len(m.Headers)+1)
	}
	for name, v := range m.Headers {
		switch {
		case len(name) > 255:
			return item{}, fmt.Errorf("%w: header name of %d bytes, more than 255", outbox.ErrRejected, len(name))
		case strings.EqualFold(name, "CC"), strings.EqualFold(name, "BCC"):
			return item{}, fmt.Errorf("%w: header %q would route copies to other queues (sender-selected distribution)", outbox.ErrRejected, name)
		case strings.EqualFold(name, KeyHeader):
			return item{}, fmt.Errorf("%w: header %q is the outbox key's", outbox.ErrRejected, name)
		}
		h[name] = v
	}
	if m.Key != "" {
		h[KeyHeader] = m.Key
	}
	return item{msg: m, exchange: exchange, key: key, pub: amqp.Publishing{
		MessageId:    m.ID,
		Timestamp:    m.CreatedAt,
		DeliveryMode: amqp.Persistent,
		Headers:      h,
		Body:         m.Payload,
	}}, nil
}
