package saga

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/concurkit/concurkit/retry"
)

// Limits of names and keys (bytes).
const (
	// MaxKeyLen bounds an instance key: it is a primary key (MySQL
	// VARBINARY(255)), and outside services get it inside step keys.
	MaxKeyLen = 255
	// MaxNameLen bounds a definition's and a step's name.
	MaxNameLen = 100
)

// DefaultLeaseTTL is Config.LeaseTTL's default.
const DefaultLeaseTTL = 30 * time.Second

// Config tunes a Definition. A nil *Config, and every zero field, means the
// documented default.
type Config struct {
	// LeaseTTL is how long a runner's claim on an instance lasts without
	// renewal. Every record the runner writes renews it, and while an
	// action or compensation runs the runner extends it every LeaseTTL/3
	// in the background (each extension bounded by that interval), so it
	// bounds how long a crashed runner blocks the instance, not how long a
	// step may take.
	//
	// A step's context ends, with ErrLeaseLost as its cause, when an
	// extension finds the lease taken over, and at the latest when the
	// lease ends as the runner knows it: the start of its last successful
	// claim, record or extension plus LeaseTTL, minus a margin of 1% of
	// LeaseTTL + 2 ms (clock rates) + 10% of LeaseTTL, at most 1 s (for
	// the step to stop), and at most LeaseTTL/2 in all — whatever an
	// extension still in flight (a statement queued behind a lock, a
	// frozen server) does. A step that stops when its context ends
	// therefore never runs while another runner holds the instance.
	//
	// Default DefaultLeaseTTL. Runners' clocks must agree to well within
	// the margin: the lease is compared with Now of the runner that
	// claims.
	LeaseTTL time.Duration
	// Retry says how often an action that fails with a retryable error
	// (retry.IsRetryable or Retry.Retryable; see Retryable) is called
	// again, with the same key, before the step is failed and compensation
	// starts. Compensations are retried on every error but the end of the
	// context, under the same budget. The zero Policy is retry's defaults
	// (a 5 s budget, 2 ms to 100 ms full-jitter backoff).
	Retry retry.Policy
	// Now is the clock of leases and timestamps. Nil means time.Now.
	Now func() time.Time
}

// Definition is a saga: a named, versioned, ordered list of steps, each
// with an action and a compensation, run with Run. Definitions are Go
// values registered in code; an instance records its definition's name,
// version and step names, and is resumed only by the same definition. In
// is the saga's input, given to Run and to every step; it must encode to
// JSON (it is stored with the instance).
//
// A Definition is immutable and safe for concurrent use.
type Definition[In any] struct {
	name    string
	version int
	steps   []Step[In]
	ttl     time.Duration
	policy  retry.Policy
	now     func() time.Time
	// heartbeat is the interval of lease extensions (LeaseTTL/3); tests
	// shorten it.
	heartbeat time.Duration
	// margin is how long before the lease's end (as known locally) a
	// step's context ends: leaseMargin(ttl).
	margin time.Duration
}

// leaseMargin is how long before its lease's end a step's context ends:
// 1% of ttl + 2 ms for clock-rate differences between runners, plus 10% of
// ttl (at most 1 s) for the step to see its context end and stop; at most
// half of ttl.
func leaseMargin(ttl time.Duration) time.Duration {
	return min(ttl/100+2*time.Millisecond+min(ttl/10, time.Second), ttl/2)
}

// New returns the Definition name (version ≥ 1) with steps, run in the
// order given. Names are 1 to MaxNameLen bytes of printable UTF-8 without
// ':' (step keys are "<key>:<step>"); step names are unique; every step has
// an action (made with NewStep). It returns an error matching
// concurkit.ErrInvalidArgument for bad names, a version < 1, no steps, a
// step without action, a negative LeaseTTL or an invalid Retry policy.
func New[In any](name string, version int, cfg *Config, steps ...Step[In]) (*Definition[In], error) {
	if err := checkName("definition name", name); err != nil {
		return nil, err
	}
	if version < 1 {
		return nil, invalid("definition %q: version %d < 1", name, version)
	}
	if len(steps) == 0 {
		return nil, invalid("definition %q: no steps", name)
	}
	seen := map[string]bool{}
	for i, s := range steps {
		if err := checkName("step name", s.name); err != nil {
			return nil, fmt.Errorf("%w (definition %q, step %d)", err, name, i)
		}
		if seen[s.name] {
			return nil, invalid("definition %q: duplicate step %q", name, s.name)
		}
		seen[s.name] = true
		if s.action == nil {
			return nil, invalid("definition %q: step %q has no action", name, s.name)
		}
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.LeaseTTL < 0 {
		return nil, invalid("negative LeaseTTL %v", c.LeaseTTL)
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if err := c.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("saga: %w", err)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Definition[In]{
		name: name, version: version, steps: append([]Step[In](nil), steps...),
		ttl: c.LeaseTTL, policy: c.Retry, now: c.Now, heartbeat: max(c.LeaseTTL/3, time.Millisecond),
		margin: leaseMargin(c.LeaseTTL),
	}, nil
}

// Name returns the definition's name.
func (d *Definition[In]) Name() string { return d.name }

// Version returns the definition's version.
func (d *Definition[In]) Version() int { return d.version }

func checkName(what, s string) error {
	if s == "" || len(s) > MaxNameLen {
		return invalid("%s %q: want 1 to %d bytes", what, s, MaxNameLen)
	}
	if strings.Contains(s, ":") {
		return invalid("%s %q contains ':'", what, s)
	}
	return checkPrintable(what, s)
}

// checkKey checks an instance key: 1 to MaxKeyLen bytes of printable UTF-8.
func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return invalid("key of %d bytes: want 1 to %d", len(key), MaxKeyLen)
	}
	return checkPrintable("key", key)
}

func checkPrintable(what, s string) error {
	if !utf8.ValidString(s) {
		return invalid("%s %q is not valid UTF-8", what, s)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return invalid("%s %q has a control character at byte %d", what, s, i)
	}
	return nil
}

// Step is one step of a Definition: a name, an action and an optional
// compensation. Make it with NewStep; the zero Step is invalid.
type Step[In any] struct {
	name       string
	action     func(ctx context.Context, c *Call[In]) (json.RawMessage, error)
	compensate func(ctx context.Context, c *Call[In], result json.RawMessage) error
}

// Name returns the step's name.
func (s Step[In]) Name() string { return s.name }

// NewStep returns the step name with its action and its compensation.
//
// The action does the step's work and returns its output, which is
// JSON-encoded and stored when the step is recorded done: a retried saga
// skips the step and returns the stored output (Result.Output, and
// Call.Output for later steps). The action gets the step's key in c.Key,
// "<saga key>:<step name>", the same in every attempt and every run: pass
// it to the outside service as its idempotency key. The action must be
// idempotent by that key, because it runs at least once: a runner that
// crashes after the action took effect and before the step was recorded
// leaves it Running, and the next Run calls it again. An action that
// returns an error must have had no effect (a failed step is not
// compensated); return a retryable error (see Retryable) for a transient
// failure, any other error to fail the saga.
//
// The compensation undoes a done step when a later step fails, in reverse
// order, and receives the step's stored output (decoded from JSON, also in
// the run that produced it). It gets the same c.Key as the action (derive
// another one, e.g. c.Key+":undo", if the service wants a new key per
// request) and must be idempotent by it too: it runs until it is recorded,
// at least once and, once recorded, never again. A nil compensation means
// the step needs no undoing (a read, a notification).
//
// A nil action is reported by New.
func NewStep[In, Out any](name string,
	action func(ctx context.Context, c *Call[In]) (Out, error),
	compensate func(ctx context.Context, c *Call[In], out Out) error,
) Step[In] {
	s := Step[In]{name: name}
	if action != nil {
		s.action = func(ctx context.Context, c *Call[In]) (json.RawMessage, error) {
			out, err := action(ctx, c)
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(out)
			if err != nil {
				return nil, &encodeError{err}
			}
			return b, nil
		}
	}
	if compensate != nil {
		s.compensate = func(ctx context.Context, c *Call[In], result json.RawMessage) error {
			var out Out
			if err := json.Unmarshal(result, &out); err != nil {
				return fmt.Errorf("saga: step %q: decoding the stored output: %w", c.Step, err)
			}
			return compensate(ctx, c, out)
		}
	}
	return s
}

// encodeError marks an action output that json.Marshal refused: the action
// succeeded, so the step is neither failed nor done (see Run).
type encodeError struct{ err error }

func (e *encodeError) Error() string { return "encoding the output: " + e.err.Error() }
func (e *encodeError) Unwrap() error { return e.err }

// Call is what an action or a compensation receives about its step.
type Call[In any] struct {
	// Key is the step's key, "<saga key>:<step name>": the idempotency key
	// for the step's calls to outside services.
	Key string
	// SagaKey is the instance key given to Run.
	SagaKey string
	// Step is the step's name.
	Step string
	// Attempt counts the runs that marked this step started, this one
	// included: 1 the first time, more after an interrupted run (a crash,
	// a cancelled context, a lost lease), which may or may not have
	// called the action.
	Attempt int
	// Input is the saga's input.
	Input In

	steps []StepRecord
}

// Output decodes into v the stored output of an earlier step that is done
// (json.Unmarshal rules). It returns an error matching
// concurkit.ErrInvalidArgument when the definition has no such step or the
// step has no output yet, and json's error when v does not fit.
func (c *Call[In]) Output(step string, v any) error {
	return output(c.SagaKey, c.steps, step, v)
}

func output(key string, steps []StepRecord, step string, v any) error {
	for _, s := range steps {
		if s.Name != step {
			continue
		}
		if s.Result == nil {
			return invalid("%s: step %q has no output (status %s)", key, step, s.Status)
		}
		if err := json.Unmarshal(s.Result, v); err != nil {
			return fmt.Errorf("saga: %s: step %q output: %w", key, step, err)
		}
		return nil
	}
	return invalid("%s: no step %q", key, step)
}

// Result is the outcome of a completed saga.
type Result struct {
	// Key is the instance key.
	Key string
	// Replayed is true when the saga had completed before this Run, which
	// returned the stored outputs without calling any action.
	Replayed bool

	steps []StepRecord
}

// Output decodes into v the stored output of step (json.Unmarshal rules).
// It returns an error matching concurkit.ErrInvalidArgument when the
// definition has no such step, and json's error when v does not fit.
func (r *Result) Output(step string, v any) error { return output(r.Key, r.steps, step, v) }
