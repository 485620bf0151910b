// Package spec holds what the outbox adapters (outboxpg, outboxmysql)
// share and no driver needs: the resolved configuration, argument checks
// and the encoding of messages. It imports only the standard library and
// stdlib-only concurkit packages.
package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/outbox"
)

// Invalid returns an error matching concurkit.ErrInvalidArgument whose
// message names the adapter. %w in format wraps.
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: "+format, append([]any{concurkit.ErrInvalidArgument, pkg}, args...)...)
}

// Resolved is a validated outbox.Config with its defaults applied and its
// table name quoted for one dialect.
type Resolved struct {
	Table     string // quoted, schema-qualified when asked
	Retention time.Duration
	ReapBatch int
	now       func() time.Time
}

// Resolve validates cfg (nil = defaults), quoting the table with quote.
// Errors match concurkit.ErrInvalidArgument.
func Resolve(pkg string, cfg *outbox.Config, quote func(parts ...string) (string, error)) (Resolved, error) {
	var r Resolved
	var c outbox.Config
	if cfg != nil {
		c = *cfg
	}
	var err error
	if r.Table, err = Table(pkg, c.Table, quote); err != nil {
		return r, err
	}
	switch {
	case c.Retention < 0:
		return r, Invalid(pkg, "negative Retention %v", c.Retention)
	case c.ReapBatch < 0:
		return r, Invalid(pkg, "negative ReapBatch %d", c.ReapBatch)
	}
	r.Retention, r.ReapBatch, r.now = c.Retention, c.ReapBatch, c.Now
	if r.Retention == 0 {
		r.Retention = outbox.DefaultRetention
	}
	if r.ReapBatch == 0 {
		r.ReapBatch = outbox.DefaultReapBatch
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// Table quotes t (defaults applied) with quote.
func Table(pkg string, t outbox.Table, quote func(parts ...string) (string, error)) (string, error) {
	if t.Name == "" {
		t.Name = outbox.DefaultTable
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

// Now returns the clock's time in UTC, truncated to microseconds (what
// both servers store).
func (r Resolved) Now() time.Time { return r.now().UTC().Truncate(time.Microsecond) }

// Row is a message ready to insert.
type Row struct {
	Msg     outbox.Message // ID filled in, CreatedAt set
	Payload []byte         // never nil
	Headers []byte         // JSON object, or nil for no headers
}

// Prepare validates tx (not nil) and m, fills in the ID and CreatedAt and
// encodes the headers. Errors match concurkit.ErrInvalidArgument
// (outbox.ErrInvalidMessage for the message).
func Prepare(pkg string, tx any, m outbox.Message, now time.Time) (Row, error) {
	if handle.IsNil(tx) {
		return Row{}, Invalid(pkg, "nil transaction")
	}
	if err := m.Validate(); err != nil {
		return Row{}, fmt.Errorf("%s: %w", pkg, err)
	}
	if m.ID == "" {
		m.ID = outbox.NewID()
	}
	m.CreatedAt = now
	r := Row{Msg: m, Payload: m.Payload}
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	if len(m.Headers) > 0 {
		h, err := json.Marshal(m.Headers)
		if err != nil { // a map[string]string always encodes
			return Row{}, fmt.Errorf("%s: encode headers: %w", pkg, err)
		}
		r.Headers = h
	}
	return r, nil
}

// Headers decodes a stored headers column into m (nil or empty: no
// headers). A column that is not a JSON object of strings (a row written
// by other code) sets m.Malformed instead of failing the claim: one such
// row must not stop the relay for good.
func Headers(m *outbox.Message, b []byte) {
	if len(b) == 0 {
		return
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		m.Malformed = &outbox.MalformedError{Column: "headers", Stored: bytes.Clone(b), Err: err}
		return
	}
	m.Headers = h
}

// Claim validates Claim's arguments.
func Claim(pkg string, n int, publish any) error {
	if n < 1 || n > outbox.MaxBatchSize {
		return Invalid(pkg, "batch size %d out of range [1, %d]", n, outbox.MaxBatchSize)
	}
	if handle.IsNil(publish) {
		return Invalid(pkg, "nil publish function")
	}
	return nil
}
