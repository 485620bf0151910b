package inbox

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic"
)

// Default names and limits. A zero field of Config means its default.
const (
	// DefaultTable is the table of processed message ids (see the toolkit
	// migrations):
	//
	//	concurkit_inbox (consumer, message_id, processed_at), PRIMARY KEY (consumer, message_id)
	DefaultTable = "concurkit_inbox"
	// DefaultSequenceTable holds the highest sequence applied per
	// (consumer, producer):
	//
	//	concurkit_inbox_sequences (consumer, producer, last_seq, updated_at), PRIMARY KEY (consumer, producer)
	DefaultSequenceTable = "concurkit_inbox_sequences"
	// DefaultReapBatch is Config.ReapBatch's default: rows deleted per
	// statement by Reap.
	DefaultReapBatch = 1000
	// MaxIDLength is the longest consumer name, message id or producer id,
	// in bytes: the key columns are VARBINARY(255) on MySQL/MariaDB.
	MaxIDLength = 255
)

// Table names a table of the inbox. A zero field means its default: Name
// is DefaultTable (or DefaultSequenceTable for Config.SequenceTable), and
// an empty Schema means the connection's default schema (PostgreSQL
// search_path) or database (MySQL). The columns are fixed (see the
// migrations); only where the table lives can be chosen.
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL database).
	Schema string
	// Name is the table name.
	Name string
}

// GapPolicy says what HandleSequence does with a message whose sequence is
// more than one above the highest applied: some messages in between have
// not been applied (lost, or not yet delivered).
type GapPolicy int

const (
	// RefuseGaps (the default) refuses the message: fn is not run, nothing
	// is recorded, and the error is a *GapError naming the missing range,
	// like Kafka's OutOfOrderSequence. The caller gives the message back to
	// its transport (nack, no ack) and it is delivered again after the
	// missing ones have been applied, so effects are applied in sequence
	// order, each once. If the missing messages are gone for good, the
	// producer's messages stall until someone decides: handle the waiting
	// message with an Inbox configured with ApplyGaps.
	RefuseGaps GapPolicy = iota
	// ApplyGaps applies the message, records its sequence as the highest,
	// and reports the missing range in SeqResult.Gap. A missing message
	// that arrives later is then below the highest sequence and is dropped
	// as a duplicate: use it only on transports that keep each producer's
	// order (a Kafka partition, an SQS FIFO message group), where a gap
	// means the messages are lost and you want to know, not to wait.
	ApplyGaps
)

// String returns "RefuseGaps" or "ApplyGaps".
func (p GapPolicy) String() string {
	switch p {
	case RefuseGaps:
		return "RefuseGaps"
	case ApplyGaps:
		return "ApplyGaps"
	}
	return "GapPolicy(" + strconv.Itoa(int(p)) + ")"
}

// Config configures an inbox (the adapters' New). A nil *Config and the
// zero value mean: tables DefaultTable and DefaultSequenceTable, ids
// remembered forever (no Window), gaps refused, Reap batches of
// DefaultReapBatch, time.Now as the clock, and pessimistic's default
// transaction options. New copies the struct; later changes to it have no
// effect.
type Config struct {
	// Table holds the processed message ids. Default {Name: DefaultTable}.
	Table Table
	// SequenceTable holds the highest sequence per (consumer, producer),
	// for HandleSequence. Default {Name: DefaultSequenceTable}.
	SequenceTable Table

	// Window, when positive, is how long a message id is remembered, like
	// the five-minute deduplication interval of SQS FIFO queues: a message
	// whose id was recorded less than Window ago (by the Now clock) is a
	// duplicate; one recorded Window ago or earlier is processed again as
	// if new, and Reap may delete its entry. Zero (the default) remembers
	// ids forever and Reap has nothing to do. Negative is bad input.
	//
	// A window trades storage for safety: a redelivery that comes later
	// than Window after the first delivery applies its effects a second
	// time. Choose it longer than the transport's longest redelivery delay
	// (visibility timeout × attempts, consumer-group rebalances, replays).
	// The timestamps are taken from Now on the consumers' machines, so
	// their clocks must agree to well within Window.
	Window time.Duration

	// Gaps is HandleSequence's policy for a sequence above the next one
	// expected. Default RefuseGaps.
	Gaps GapPolicy

	// ReapBatch is how many expired entries Reap deletes per statement
	// (and transaction). Default DefaultReapBatch; negative is bad input.
	ReapBatch int

	// Now is the clock for processed_at and updated_at, and for deciding
	// what Window has expired. Nil means time.Now. Tests inject a fake
	// clock here instead of sleeping through windows.
	Now func() time.Time

	// TxOptions are the options of the transactions Handle and
	// HandleSequence run in (pessimisticpg.InTx, pessimisticmysql.InTx):
	// isolation, lock timeout, retry of deadlocks and serialization
	// failures. Nil means InTx's defaults. With a transaction the caller
	// opened, Isolation must be zero (InTx's rule).
	TxOptions *pessimistic.Options
}

// SeqResult is the outcome of HandleSequence.
type SeqResult struct {
	// Applied is true when fn ran and its effects committed together with
	// the new highest sequence.
	Applied bool
	// Last is the highest sequence applied for the (consumer, producer)
	// before this call; 0 when none was.
	Last int64
	// Gap, when not nil, names the sequences missing between Last and the
	// message's (Last+1 … seq-1). Under ApplyGaps the message was applied
	// anyway; under RefuseGaps it was not, and Gap is also the returned
	// error.
	Gap *GapError
}

// Duplicate reports whether the message was dropped as a duplicate: not
// applied and not refused for a gap (its sequence is at most Last).
func (r SeqResult) Duplicate() bool { return !r.Applied && r.Gap == nil }

// GapError names the sequences missing before a message: From through To,
// inclusive. It matches ErrSequenceGap with errors.Is.
type GapError struct {
	Consumer string // the consumer that saw the gap
	Producer string // the producer whose messages are missing
	From, To int64  // the missing sequences, inclusive; From <= To
}

// Error says which sequences of which producer are missing, e.g.
// `inbox: sequence gap: consumer "billing", producer "orders-1": missing 5 through 7`.
func (e *GapError) Error() string {
	if e.From == e.To {
		return fmt.Sprintf("inbox: sequence gap: consumer %q, producer %q: missing %d", e.Consumer, e.Producer, e.From)
	}
	return fmt.Sprintf("inbox: sequence gap: consumer %q, producer %q: missing %d through %d", e.Consumer, e.Producer, e.From, e.To)
}

// Is makes errors.Is(err, ErrSequenceGap) true.
func (e *GapError) Is(target error) bool { return target == ErrSequenceGap }

// ErrorType returns "sequence_gap" (see observe.ErrorType).
func (e *GapError) ErrorType() string { return "sequence_gap" }

// sentinel is an error callers branch on with errors.Is; typ is its
// observe.ErrorType name.
type sentinel struct{ msg, typ string }

func (e *sentinel) Error() string { return e.msg }

// ErrorType returns the sentinel's metric name.
func (e *sentinel) ErrorType() string { return e.typ }

var (
	// ErrSequenceGap is matched by every *GapError: HandleSequence refused
	// a message (RefuseGaps) because earlier sequences of its producer
	// have not been applied. ErrorType "sequence_gap".
	ErrSequenceGap error = &sentinel{"inbox: sequence gap", "sequence_gap"}

	// ErrInvalidID is returned, before any I/O, for a consumer name,
	// message id or producer id that cannot be a key: empty, longer than
	// MaxIDLength bytes, not valid UTF-8, or containing a NUL byte. It
	// matches concurkit.ErrInvalidArgument. A consumer may treat it as a
	// poison message (dead-letter it) rather than a bug of its own.
	ErrInvalidID = concurkit.InvalidArgumentError("inbox: invalid id")
)

// ValidateID returns nil if id can be a consumer name, message id or
// producer id (1 to MaxIDLength bytes of valid UTF-8 without NUL), and an
// error matching ErrInvalidID (and concurkit.ErrInvalidArgument) that
// names what (e.g. "message id") otherwise. The rule is the same on every
// server, so an id accepted by one adapter is accepted by all.
func ValidateID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidID, what)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidID, what, len(id), MaxIDLength)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidID, what)
	}
	for i := 0; i < len(id); i++ {
		if id[i] == 0 {
			return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalidID, what)
		}
	}
	return nil
}
