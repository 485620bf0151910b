package outboxnats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/outbox"
)

// KeyHeader is the NATS header that carries outbox.Message.Key (absent
// when the key is empty).
const KeyHeader = "Outbox-Key"

// JetStream is what a Publisher publishes through: jetstream.JetStream
// (jetstream.New(nc)) has it.
type JetStream interface {
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

var (
	_ JetStream        = jetstream.JetStream(nil)
	_ outbox.Publisher = (*Publisher)(nil)
)

// Config configures a Publisher. A nil *Config and the zero value mean:
// subject = the message's Topic, no dead-letter hook. New copies it.
type Config struct {
	// Subject returns the subject a message is published on. Nil means
	// msg.Topic. It must return a valid publish subject that a stream
	// captures (see the package doc for what is refused).
	Subject func(msg outbox.Message) string
	// DeadLetter receives the messages that cannot be delivered intact
	// (see the package doc); when it returns nil they count as handled.
	// It may be called again for the same message when its batch fails
	// for another reason and is retried: key what it stores on msg.ID.
	// Nil means such a message fails its batch (an error matching
	// outbox.ErrRejected or outbox.ErrMalformedRow).
	DeadLetter outbox.DeadLetterFunc
}

// Stats counts what a Publisher's acks said, since New.
type Stats struct {
	// Stored is the number of messages JetStream stored (acked as new).
	Stored int64
	// Duplicates is the number of publishes JetStream dropped as copies
	// of a message stored within its duplicate window (acked with
	// Duplicate set): the relay's re-publishes after a failure.
	Duplicates int64
	// DeadLettered is the number of messages DeadLetter accepted.
	DeadLettered int64
}

// Publisher publishes outbox batches to JetStream; it is an
// outbox.Publisher. Build it with New; it is safe for concurrent use (by
// several relays).
type Publisher struct {
	js         JetStream
	subject    func(outbox.Message) string
	deadLetter outbox.DeadLetterFunc

	stored, duplicates, deadLettered atomic.Int64
}

// New returns a Publisher that publishes through js, configured by cfg
// (nil = defaults). Errors, matching concurkit.ErrInvalidArgument: a nil
// or typed-nil js.
func New(js JetStream, cfg *Config) (*Publisher, error) {
	if handle.IsNil(js) {
		return nil, fmt.Errorf("%w: outboxnats: nil JetStream", concurkit.ErrInvalidArgument)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Subject == nil {
		c.Subject = func(m outbox.Message) string { return m.Topic }
	}
	return &Publisher{js: js, subject: c.Subject, deadLetter: c.DeadLetter}, nil
}

// Stats returns the counts so far.
func (p *Publisher) Stats() Stats {
	return Stats{Stored: p.stored.Load(), Duplicates: p.duplicates.Load(), DeadLettered: p.deadLettered.Load()}
}

// rejected is a message that cannot be delivered, and why.
type rejected struct {
	msg    outbox.Message
	reason error
}

// Publish implements outbox.Publisher: it publishes every message of the
// batch asynchronously, with Nats-Msg-Id = msg.ID, and returns nil once
// JetStream has acknowledged each one (stored, or dropped as a duplicate)
// and DeadLetter has accepted each one that cannot be delivered.
//
// Errors: the first publish or ack error, wrapped with the message's ID
// and subject (the batch is published again later; JetStream drops the
// messages it already stored); an error matching outbox.ErrRejected or
// outbox.ErrMalformedRow for an undeliverable message when DeadLetter is
// nil; DeadLetter's own error; errors.Join(the messages still unacked,
// ctx.Err()) when ctx ends first.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	// PublishMsgAsync takes no context: an ended one must stop the batch
	// before anything is sent.
	if err := ctx.Err(); err != nil {
		return errors.Join(fmt.Errorf("outboxnats: %d messages not published", len(msgs)), err)
	}
	var (
		bad     []rejected
		pending = make([]jetstream.PubAckFuture, 0, len(msgs))
		sent    = make([]int, 0, len(msgs))
	)
	for i, m := range msgs {
		nm, err := p.natsMsg(m)
		if err == nil {
			var f jetstream.PubAckFuture
			f, err = p.js.PublishMsgAsync(nm)
			if err == nil {
				pending, sent = append(pending, f), append(sent, i)
				continue
			}
			if refused(err) {
				err = fmt.Errorf("%w: %w", outbox.ErrRejected, err)
			}
		}
		if !errors.Is(err, outbox.ErrRejected) && !errors.Is(err, outbox.ErrMalformedRow) {
			return fmt.Errorf("outboxnats: publish %s to %q: %w", m.ID, p.subject(m), err)
		}
		bad = append(bad, rejected{m, err})
	}
	for j, f := range pending {
		m := msgs[sent[j]]
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				p.duplicates.Add(1)
			} else {
				p.stored.Add(1)
			}
		case err := <-f.Err():
			if !refused(err) {
				return fmt.Errorf("outboxnats: publish %s to %q: %w", m.ID, p.subject(m), err)
			}
			bad = append(bad, rejected{m, fmt.Errorf("%w: %w", outbox.ErrRejected, err)})
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("outboxnats: %d of %d messages not acknowledged", len(pending)-j, len(msgs)), ctx.Err())
		}
	}
	for _, r := range bad {
		if p.deadLetter == nil {
			return fmt.Errorf("outboxnats: message %s (subject %q) cannot be delivered and Config.DeadLetter is nil: %w", r.msg.ID, p.subject(r.msg), r.reason)
		}
		if err := p.deadLetter(ctx, r.msg, r.reason); err != nil {
			return fmt.Errorf("outboxnats: dead-letter %s: %w", r.msg.ID, err)
		}
		p.deadLettered.Add(1)
	}
	return nil
}

// refused reports whether err says that this message can never be
// published: the client's own checks (payload above the server's
// max_payload, a subject or header it cannot write) or the stream's
// maximum message size.
func refused(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		return true
	}
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrBadHeaderMsg)
}

// natsMsg maps m to a NATS message, or returns why it cannot be delivered
// intact (an error matching outbox.ErrRejected or outbox.ErrMalformedRow).
func (p *Publisher) natsMsg(m outbox.Message) (*nats.Msg, error) {
	if m.Malformed != nil {
		return nil, m.Malformed
	}
	subject := p.subject(m)
	if err := ValidateSubject(subject); err != nil {
		return nil, err
	}
	h := make(nats.Header, len(m.Headers)+2)
	for name, v := range m.Headers {
		if err := validHeader(name, v); err != nil {
			return nil, err
		}
		h[name] = []string{v}
	}
	if m.Key != "" {
		if err := validValue(KeyHeader, m.Key); err != nil {
			return nil, err
		}
		h[KeyHeader] = []string{m.Key}
	}
	h[jetstream.MsgIDHeader] = []string{m.ID}
	return &nats.Msg{Subject: subject, Data: m.Payload, Header: h}, nil
}

// ValidateSubject returns nil if s can be a subject Publish sends to: one
// or more non-empty tokens separated by '.', of printable characters
// other than space, no wildcard token ('*', '>'), and a first token that
// does not start with '$' (the server's own API: $JS, $SYS, $KV, …). The
// error matches outbox.ErrRejected.
func ValidateSubject(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty subject", outbox.ErrRejected)
	}
	if s[0] == '$' {
		return fmt.Errorf("%w: subject %q addresses the server's API ($…)", outbox.ErrRejected, s)
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return fmt.Errorf("%w: subject %q has an empty or wildcard token", outbox.ErrRejected, s)
		}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("%w: subject %q has a space or control character at %d", outbox.ErrRejected, s, i)
		}
	}
	return nil
}

// validHeader checks that a header of the message can be carried
// unchanged and steers nothing in JetStream.
func validHeader(name, v string) error {
	if name == "" {
		return fmt.Errorf("%w: empty header name", outbox.ErrRejected)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 33 || c > 126 || strings.IndexByte(`"()/,:;<=>?@[\]{}`, c) >= 0 {
			return fmt.Errorf("%w: header name %q is not a NATS header token", outbox.ErrRejected, name)
		}
	}
	if len(name) >= 5 && strings.EqualFold(name[:5], "Nats-") {
		return fmt.Errorf("%w: header %q is reserved for NATS (Nats-…)", outbox.ErrRejected, name)
	}
	if strings.EqualFold(name, KeyHeader) {
		return fmt.Errorf("%w: header %q is the outbox key's", outbox.ErrRejected, name)
	}
	return validValue(name, v)
}

// validValue checks that NATS carries v unchanged: nats.go replaces CR
// and LF by spaces and trims surrounding spaces and tabs.
func validValue(name, v string) error {
	if strings.ContainsAny(v, "\r\n") || strings.Trim(v, " \t") != v {
		return fmt.Errorf("%w: header %q: value has CR, LF or surrounding spaces, which NATS would alter", outbox.ErrRejected, name)
	}
	return nil
}
