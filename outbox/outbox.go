package outbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
)

// Defaults. A zero field of Config or RelayConfig means its default.
const (
	// DefaultTable is the outbox table (see the toolkit migrations):
	//
	//	concurkit_outbox (id, message_id, topic, message_key, payload, headers, created_at, published_at)
	DefaultTable = "concurkit_outbox"
	// DefaultRetention is how long published rows are kept before Reap
	// deletes them.
	DefaultRetention = 24 * time.Hour
	// DefaultReapBatch is the number of rows Reap deletes per statement.
	DefaultReapBatch = 1000
	// MaxTopicLength and MaxKeyLength bound Message.Topic and Message.Key,
	// in bytes (VARBINARY(255) on MySQL/MariaDB).
	MaxTopicLength = 255
	MaxKeyLength   = 255
	// MaxHeadersLength bounds Message.Headers: the sum of the lengths of
	// every name and value, in bytes.
	MaxHeadersLength = 64 << 10
)

// Message is one event in the outbox.
type Message struct {
	// ID identifies the message end to end: consumers deduplicate on it
	// (inboxpg.Handle(ctx, db, consumer, msg.ID, fn)), so it must be
	// unique across every producer whose messages a consumer sees. Empty
	// means a new random UUID (version 7: time-ordered, so inbox keys are
	// appended to their index rather than scattered). Otherwise it must
	// satisfy inbox.ValidateID (1 to 255 bytes of UTF-8 without NUL).
	ID string
	// Topic is where the publisher sends it (a Kafka topic, an SNS topic,
	// a queue name). Required, at most MaxTopicLength bytes of UTF-8
	// without NUL (PostgreSQL text).
	Topic string
	// Key is optional: a partition or ordering key for the publisher, at
	// most MaxKeyLength bytes of UTF-8 without NUL (PostgreSQL text).
	Key string
	// Payload is the message body, any bytes; nil is stored as empty. Its
	// size is bounded by the server only (PostgreSQL bytea: 1 GB;
	// MariaDB/MySQL: max_allowed_packet).
	Payload []byte
	// Headers are optional metadata (trace context, content type), stored
	// as a JSON object: names and values are UTF-8 without NUL (JSON
	// would replace invalid UTF-8, and PostgreSQL jsonb refuses \u0000),
	// MaxHeadersLength bytes in all.
	Headers map[string]string
	// CreatedAt is set by Add (Config.Now, in UTC, truncated to
	// microseconds); it is ignored on input.
	CreatedAt time.Time
	// Malformed is set by a Source's Claim, never by producers (Add
	// ignores it): non-nil when the stored row could not be read into
	// this Message — its headers column holds something other than a
	// JSON object of strings, as a row written by other code may — and
	// then a *MalformedError matching ErrMalformedRow, which holds the
	// stored bytes; Headers is nil and the other fields are as stored.
	// Such a row never stops the relay: it is handed to the publisher
	// with its batch, flagged, and the publisher decides — publish it
	// without headers, or dead-letter it — and returns nil to have it
	// marked published with the rest (an error keeps the whole batch
	// unpublished, as for any message).
	Malformed error
}

// ErrInvalidMessage is returned by Add, before any I/O, for a message that
// cannot be stored unchanged: an invalid ID, an empty or over-long Topic,
// an over-long Key or Headers, NUL or invalid UTF-8 in Topic, Key or
// Headers. It matches concurkit.ErrInvalidArgument.
var ErrInvalidMessage = concurkit.InvalidArgumentError("outbox: invalid message")

// ErrMalformedRow matches Message.Malformed: a stored row that could not
// be read into a Message.
var ErrMalformedRow = errors.New("outbox: malformed row")

// MalformedError is Message.Malformed: which column of a stored row could
// not be read, its stored bytes, and why. It matches ErrMalformedRow.
type MalformedError struct {
	Column string // "headers"
	Stored []byte // the column's bytes as stored
	Err    error  // the decoding error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("outbox: malformed row: column %s (%d bytes): %v", e.Column, len(e.Stored), e.Err)
}

// Is reports whether target is ErrMalformedRow.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformedRow }

// Unwrap returns the decoding error.
func (e *MalformedError) Unwrap() error { return e.Err }

// Validate returns nil if m can be added to an outbox and read back
// unchanged by every adapter (an empty ID will be generated), or an error
// matching ErrInvalidMessage that says why. It checks everything Add
// stores, so that no INSERT fails on a value: on PostgreSQL a failed
// statement aborts the caller's business transaction (SQLSTATE 25P02),
// which an error before any I/O does not.
func (m Message) Validate() error {
	if m.ID != "" {
		if err := inbox.ValidateID("ID", m.ID); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
		}
	}
	switch {
	case m.Topic == "":
		return fmt.Errorf("%w: empty Topic", ErrInvalidMessage)
	case len(m.Topic) > MaxTopicLength:
		return fmt.Errorf("%w: Topic is %d bytes, more than %d", ErrInvalidMessage, len(m.Topic), MaxTopicLength)
	case len(m.Key) > MaxKeyLength:
		return fmt.Errorf("%w: Key is %d bytes, more than %d", ErrInvalidMessage, len(m.Key), MaxKeyLength)
	}
	if err := text("Topic", m.Topic); err != nil {
		return err
	}
	if err := text("Key", m.Key); err != nil {
		return err
	}
	n := 0
	for name, v := range m.Headers {
		if err := text("header name", name); err != nil {
			return err
		}
		if err := text(fmt.Sprintf("header %q", name), v); err != nil {
			return err
		}
		n += len(name) + len(v)
	}
	if n > MaxHeadersLength {
		return fmt.Errorf("%w: Headers are %d bytes, more than %d", ErrInvalidMessage, n, MaxHeadersLength)
	}
	return nil
}

// text checks that s can be stored as text by every adapter: valid UTF-8
// without NUL.
func text(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidMessage, what)
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("%w: %s has a NUL byte at %d", ErrInvalidMessage, what, i)
	}
	return nil
}

// NewID returns a new random message id: a UUID version 7 (RFC 9562)
// whose first 48 bits are the Unix time in milliseconds, in the canonical
// 36-character form. Add uses it for messages without an ID.
func NewID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	ms := uint64(time.Now().UnixMilli())
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], ms)
	copy(u[:6], ts[2:])
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Table names the outbox table. A zero Name means DefaultTable; an empty
// Schema means the connection's default schema (PostgreSQL search_path) or
// database (MySQL). The columns are fixed (see the migrations).
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL database).
	Schema string
	// Name is the table name.
	Name string
}

// Config configures an outbox store (the adapters' New). A nil *Config
// and the zero value mean: table DefaultTable, published rows kept for
// DefaultRetention, Reap batches of DefaultReapBatch, time.Now as the
// clock. New copies the struct.
type Config struct {
	// Table is the outbox table. Default {Name: DefaultTable}.
	Table Table
	// Retention is how long a published row is kept (for inspection and
	// replay by hand) before Reap deletes it. Default DefaultRetention;
	// negative is bad input.
	Retention time.Duration
	// ReapBatch is how many rows Reap deletes per statement. Default
	// DefaultReapBatch; negative is bad input.
	ReapBatch int
	// Now is the clock for created_at and published_at, and for Reap's
	// cutoff. Nil means time.Now.
	Now func() time.Time
}

// ErrRejected matches the reason a Publisher gives its DeadLetterFunc for
// a message the receiver refused for good — too large for the broker, a
// destination name the broker cannot accept, a header it cannot carry —
// so that publishing it again cannot succeed. The broker adapters
// (outbox/outboxnats, outbox/outboxamqp) wrap the broker's own error with
// it; a missing destination (no stream, no queue bound) is not a
// rejection: it may be created, and the batch is retried.
var ErrRejected = errors.New("outbox: message rejected by the receiver")

// DeadLetterFunc receives a message that a Publisher can never deliver
// intact: the receiver refused it (reason matches ErrRejected) or its
// stored row could not be read (reason matches ErrMalformedRow, and
// msg.Malformed is set). It keeps the message somewhere a person will
// look — a table, a dead-letter queue, a log line with the payload — and
// returns nil: the message then counts as handled and its row is marked
// published with its batch, so one bad message neither stops the relay
// nor is retried forever. An error fails the batch instead (published
// again later, with the relay's backoff). It runs inside the relay's
// claim, with the publish's context, and may be called concurrently by
// several relays.
type DeadLetterFunc func(ctx context.Context, msg Message, reason error) error

// Publisher sends messages to the outside world (a broker, a queue,
// webhooks). Publish must return nil only once every message of the batch
// has been accepted by the receiver; on an error the whole batch stays
// unpublished and is published again later, so messages that did go out
// are sent twice: the consumers' inbox absorbs that. A message that can
// never be published blocks its batch until Publish stops failing for it:
// dead-letter it inside Publish and return nil. A message whose stored
// row could not be read comes with Message.Malformed set: publish it as
// it is (without headers) or dead-letter it.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) error
}

// PublisherFunc is a function that is a Publisher.
type PublisherFunc func(ctx context.Context, msgs []Message) error

// Publish calls f(ctx, msgs).
func (f PublisherFunc) Publish(ctx context.Context, msgs []Message) error { return f(ctx, msgs) }

// Each returns a Publisher that calls publish for each message in order
// and stops at the first error, which fails the batch.
func Each(publish func(ctx context.Context, msg Message) error) Publisher {
	return PublisherFunc(func(ctx context.Context, msgs []Message) error {
		for _, m := range msgs {
			if err := publish(ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// Source is what a Relay publishes from: the adapters' *Store (outboxpg,
// outboxmysql).
type Source interface {
	// Claim locks up to n unpublished messages, oldest first, that no
	// other relay holds, calls publish with them (not at all when there
	// are none), marks them published if publish returns nil, and returns
	// how many it published. When publish fails, or the relay dies or
	// loses its connection before the mark commits, the messages become
	// claimable again: nothing is lost, and a message may be published
	// more than once.
	Claim(ctx context.Context, n int, publish func(ctx context.Context, msgs []Message) error) (int, error)
}
