package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/retry"
)

// Relay defaults and limits. A zero field of RelayConfig means its default.
const (
	DefaultBatchSize      = 100
	MaxBatchSize          = 10000
	DefaultPollInterval   = time.Second
	DefaultPublishTimeout = 30 * time.Second
	DefaultRetryDelay     = 100 * time.Millisecond
	DefaultMaxRetryDelay  = 10 * time.Second
)

// RelayConfig configures a Relay. A nil *RelayConfig and the zero value
// mean the defaults below; negative values are bad input. NewRelay copies
// the struct.
type RelayConfig struct {
	// BatchSize is the most messages claimed and published at once.
	// Default DefaultBatchSize (100), at most MaxBatchSize.
	BatchSize int
	// PollInterval is how long Run waits before claiming again after a
	// batch came back short (the outbox is drained). Default
	// DefaultPollInterval (1 s). It bounds the delivery latency of a
	// quiet outbox; a busy one is drained without waiting.
	PollInterval time.Duration
	// PublishTimeout bounds one Publish call: its context is cancelled
	// after this long, the batch fails and is claimable again. The relay
	// keeps the batch's rows locked (its transaction open) while the
	// publisher runs, so this also bounds how long a stuck publisher holds
	// them. Default DefaultPublishTimeout (30 s).
	PublishTimeout time.Duration
	// RetryDelay and MaxRetryDelay shape Run's backoff after a failed
	// batch (a publisher error, a lost connection): full jitter, doubling
	// from RetryDelay up to MaxRetryDelay. Run never gives up. Defaults
	// DefaultRetryDelay (100 ms) and DefaultMaxRetryDelay (10 s).
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
}

// Relay moves messages from an outbox to a publisher, at least once: it
// claims a batch (Source.Claim), publishes it, and the source marks it
// published only after the publisher returned nil. Several relays (in one
// process or many) may run on one outbox: each claims rows the others have
// not locked, so in the normal case every message is published once; after
// a failure (publisher error, relay crash, lost connection) a message can
// be published again, which the consumers' inbox absorbs.
//
// Order: within one batch messages come in outbox order (the order in
// which rows were inserted, not committed). Across batches and relays
// there is no order: a batch can fail and be published after a later one,
// and two relays publish in parallel. A consumer that needs one producer's
// order uses sequences (inbox HandleSequence) or a single relay.
//
// A Relay is safe for concurrent use; it holds no connection of its own.
type Relay struct {
	src Source
	pub Publisher
	cfg RelayConfig
}

// NewRelay returns a Relay that publishes from src to pub, configured by
// cfg (nil = defaults). Errors, matching concurkit.ErrInvalidArgument: a
// nil or typed-nil src or pub, a negative field, a BatchSize above
// MaxBatchSize.
func NewRelay(src Source, pub Publisher, cfg *RelayConfig) (*Relay, error) {
	if handle.IsNil(src) {
		return nil, invalid("nil Source")
	}
	if handle.IsNil(pub) {
		return nil, invalid("nil Publisher")
	}
	var c RelayConfig
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.BatchSize < 0 || c.BatchSize > MaxBatchSize:
		return nil, invalid("BatchSize %d out of range [0, %d]", c.BatchSize, MaxBatchSize)
	case c.PollInterval < 0, c.PublishTimeout < 0, c.RetryDelay < 0, c.MaxRetryDelay < 0:
		return nil, invalid("negative duration in %+v", c)
	}
	c.BatchSize = or(c.BatchSize, DefaultBatchSize)
	c.PollInterval = or(c.PollInterval, DefaultPollInterval)
	c.PublishTimeout = or(c.PublishTimeout, DefaultPublishTimeout)
	c.RetryDelay = or(c.RetryDelay, DefaultRetryDelay)
	c.MaxRetryDelay = or(c.MaxRetryDelay, DefaultMaxRetryDelay)
	return &Relay{src: src, pub: pub, cfg: c}, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: outbox: "+format, append([]any{concurkit.ErrInvalidArgument}, args...)...)
}

// Once claims one batch of up to BatchSize messages, publishes it and
// returns how many it published (0 when the outbox has nothing
// unclaimed). It is the step Run repeats; call it yourself to relay from
// a cron job or a function invocation, or to drain an outbox in a test.
//
// Errors: the publisher's error wrapped as "outbox: publish N messages:
// …" (the batch stays unpublished); the source's errors (the adapters
// wrap driver errors; a lost connection or an ambiguous commit leaves the
// batch claimable or published, never lost); ctx errors.
func (r *Relay) Once(ctx context.Context) (int, error) {
	return r.src.Claim(ctx, r.cfg.BatchSize, r.publish)
}

func (r *Relay) publish(ctx context.Context, msgs []Message) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	if err := r.pub.Publish(ctx, msgs); err != nil {
		return fmt.Errorf("outbox: publish %d messages: %w", len(msgs), err)
	}
	return nil
}

// Run relays until ctx ends, then returns ctx.Err(). It claims and
// publishes batch after batch while they come back full, waits
// PollInterval when the outbox is drained, and backs off (RetryDelay …
// MaxRetryDelay, full jitter) after a failed batch, which it reports to
// the observe hooks on ctx as a retry (RetryEvent{Package: "outbox"}); it
// never gives up. Cancelling ctx while a batch is being published cancels
// the publisher's context and rolls the claim back: the batch is
// published again by the next relay.
func (r *Relay) Run(ctx context.Context) error {
	backoff := retry.Policy{BaseDelay: r.cfg.RetryDelay, MaxDelay: r.cfg.MaxRetryDelay}
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	failures := 0
	for {
		n, err := r.Once(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var wait time.Duration
		switch {
		case err != nil:
			failures++
			wait = backoff.Backoff(failures)
			observe.FromContext(ctx).OnRetry(ctx, observe.RetryEvent{Package: "outbox", Attempt: failures, Err: err, Delay: wait})
		case n < r.cfg.BatchSize:
			failures = 0
			wait = r.cfg.PollInterval
		default:
			failures = 0
			continue // more may be waiting
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
