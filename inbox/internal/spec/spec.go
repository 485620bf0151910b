// Package spec holds what the inbox adapters (inboxpg, inboxmysql) share
// and no driver needs: the resolved configuration, argument checks and the
// sequence rule. It imports only the standard library and stdlib-only
// concurkit packages.
package spec

import (
	"fmt"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/pessimistic"
)

// Invalid returns an error matching concurkit.ErrInvalidArgument whose
// message names the adapter: "concurkit: invalid argument: <pkg>: <what>".
// %w in format wraps.
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: "+format, append([]any{concurkit.ErrInvalidArgument, pkg}, args...)...)
}

// Resolved is a validated inbox.Config with its defaults applied and its
// table names quoted for one dialect.
type Resolved struct {
	Table, SequenceTable string // quoted, schema-qualified when asked
	Window               time.Duration
	Gaps                 inbox.GapPolicy
	ReapBatch            int
	TxOptions            *pessimistic.Options
	now                  func() time.Time
}

// Resolve validates db (not nil) and cfg (nil = defaults), quoting the
// table names with quote (ident.Postgres or ident.MySQL). The caller's
// Config is copied, never modified. Errors match
// concurkit.ErrInvalidArgument.
func Resolve(pkg string, db any, cfg *inbox.Config, quote func(parts ...string) (string, error)) (Resolved, error) {
	var r Resolved
	if handle.IsNil(db) {
		return r, Invalid(pkg, "nil database handle")
	}
	var c inbox.Config
	if cfg != nil {
		c = *cfg
	}
	var err error
	if r.Table, err = table(pkg, c.Table, inbox.DefaultTable, quote); err != nil {
		return r, err
	}
	if r.SequenceTable, err = table(pkg, c.SequenceTable, inbox.DefaultSequenceTable, quote); err != nil {
		return r, err
	}
	switch {
	case c.Window < 0:
		return r, Invalid(pkg, "negative Window %v", c.Window)
	case c.Gaps != inbox.RefuseGaps && c.Gaps != inbox.ApplyGaps:
		return r, Invalid(pkg, "unknown gap policy %v", c.Gaps)
	case c.ReapBatch < 0:
		return r, Invalid(pkg, "negative ReapBatch %d", c.ReapBatch)
	}
	if c.ReapBatch == 0 {
		c.ReapBatch = inbox.DefaultReapBatch
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.TxOptions != nil {
		o := *c.TxOptions // the caller may change theirs later
		c.TxOptions = &o
	}
	r.Window, r.Gaps, r.ReapBatch, r.TxOptions, r.now = c.Window, c.Gaps, c.ReapBatch, c.TxOptions, c.Now
	return r, nil
}

func table(pkg string, t inbox.Table, def string, quote func(parts ...string) (string, error)) (string, error) {
	if t.Name == "" {
		t.Name = def
	}
	parts := []string{t.Name}
	if t.Schema != "" {
		parts = []string{t.Schema, t.Name}
	}
	q, err := quote(parts...)
	if err != nil {
		return "", Invalid(pkg, "table: %w", err)
	}
	return q, nil
}

// Now returns the clock's time in UTC, truncated to the microseconds both
// servers store (PostgreSQL timestamptz, MySQL DATETIME(6)), so that what
// is compared later is what was written.
func (r Resolved) Now() time.Time { return r.now().UTC().Truncate(time.Microsecond) }

// Cutoff returns now - Window: an entry whose processed_at is at or before
// it has expired. Meaningful only with a Window (callers check).
func (r Resolved) Cutoff(now time.Time) time.Time { return now.Add(-r.Window) }

// IDs validates the ids of a call (pairs of what, id). Errors match
// inbox.ErrInvalidID.
func IDs(pkg string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := inbox.ValidateID(pairs[i], pairs[i+1]); err != nil {
			return fmt.Errorf("%s: %w", pkg, err)
		}
	}
	return nil
}

// Fn rejects a nil handler function.
func Fn(pkg string, fn any) error {
	if handle.IsNil(fn) {
		return Invalid(pkg, "nil function")
	}
	return nil
}

// Seq rejects a sequence number below 1.
func Seq(pkg string, seq int64) error {
	if seq < 1 {
		return Invalid(pkg, "sequence %d < 1 (sequences start at 1)", seq)
	}
	return nil
}

// Decide applies the sequence rule to a message with sequence seq when
// last is the highest applied: seq <= last is a duplicate (not applied, no
// gap); last+1 is applied; above that, the missing range is reported and
// the message applied only under ApplyGaps.
func Decide(consumer, producer string, last, seq int64, p inbox.GapPolicy) inbox.SeqResult {
	r := inbox.SeqResult{Last: last}
	switch {
	case seq <= last:
		return r
	case seq == last+1:
		r.Applied = true
		return r
	}
	r.Gap = &inbox.GapError{Consumer: consumer, Producer: producer, From: last + 1, To: seq - 1}
	r.Applied = p == inbox.ApplyGaps
	return r
}
