// Package spec holds what the ratelimit stores (ratelimitredis,
// ratelimitpg) share and no driver needs: argument checks, the arithmetic
// of both algorithms in whole microseconds, the Decision built from what a
// store returns, and Model, the reference implementation their tests
// compare against. It imports only the standard library and stdlib-only
// concurkit packages.
package spec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/ratelimit"
)

// Invalid returns an error matching concurkit.ErrInvalidArgument whose
// message names the package.
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", concurkit.ErrInvalidArgument, pkg, fmt.Sprintf(format, args...))
}

// StoreError wraps an error of the store; when ctx has ended it also
// matches ctx.Err(). A client that put ctx's deadline on its socket (as
// go-redis does with ContextTimeoutEnabled) reports an i/o timeout at the
// deadline, possibly before ctx.Err() is set: a deadline that has passed
// counts as context.DeadlineExceeded.
//
// The key is named by ratelimit.KeyID, never quoted: it may be a secret.
// The store's own message is redacted too, should it echo the key (a
// server error quoting a value): every occurrence of a key of
// minRedactLen bytes or more is replaced by its KeyID. The error still
// unwraps to the store's error, for errors.Is and errors.As.
func StoreError(ctx context.Context, pkg, key string, err error) error {
	msg := err.Error()
	if len(key) >= minRedactLen {
		msg = strings.ReplaceAll(msg, key, ratelimit.KeyID(key))
	}
	err = &redacted{msg: pkg + ": " + ratelimit.KeyID(key) + ": " + msg, err: err}
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return err
}

// minRedactLen is the shortest key whose occurrences StoreError removes
// from a store's message: a shorter one is no secret worth hiding and would
// mangle the message (the key "1" in "127.0.0.1").
const minRedactLen = 4

// redacted is an error whose message is given (the key redacted) and which
// unwraps to the original.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Algorithm checks a Config's algorithm.
func Algorithm(pkg string, a ratelimit.Algorithm) error {
	if a != ratelimit.GCRA && a != ratelimit.FixedWindow {
		return Invalid(pkg, "unknown algorithm %v", a)
	}
	return nil
}

// maxNow is the first instant, in µs since the Unix epoch, that the stores
// do not accept (2200-01-01): below it every sum of a time and a
// MaxPeriod-bounded duration stays under 2^53, exact in Lua's doubles.
var maxNow = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// Call is one validated AllowN call, in the stores' units: microseconds,
// times since the Unix epoch.
type Call struct {
	Algo     ratelimit.Algorithm
	Limit    ratelimit.Limit // Burst resolved
	N        int64           // cost
	Now      int64           // the caller's clock
	Capacity int64           // the most one key ever admits at once: Rate (FixedWindow) or Burst (GCRA)
	Period   int64

	// FixedWindow: the end of the window that contains Now.
	WindowEnd int64
	// GCRA: the emission interval T = Period/Rate (rounded up), the
	// increment n·T of one call and the tolerance τ = Burst·T.
	Emission, Inc, Tau int64
}

// Prepare validates a call (key, limit for algorithm a, cost n, and the
// clock's reading now) and computes its parameters. Every error matches
// concurkit.ErrInvalidArgument.
func Prepare(pkg string, a ratelimit.Algorithm, key string, l ratelimit.Limit, n int64, now time.Time) (Call, error) {
	if err := Key(pkg, key); err != nil {
		return Call{}, err
	}
	if err := l.Validate(a); err != nil {
		return Call{}, fmt.Errorf("%s: %w", pkg, err)
	}
	if l.Burst == 0 {
		l.Burst = l.Rate
	}
	c := Call{Algo: a, Limit: l, N: n, Now: now.UnixMicro(), Period: Micros(l.Period), Capacity: l.Rate}
	if a == ratelimit.GCRA {
		c.Capacity = l.Burst
	}
	switch {
	case n < 1:
		return Call{}, Invalid(pkg, "cost %d: must be at least 1", n)
	case n > c.Capacity:
		return Call{}, Invalid(pkg, "cost %d exceeds what limit %v can ever admit (%d)", n, l, c.Capacity)
	case c.Now < 0 || c.Now >= maxNow:
		return Call{}, Invalid(pkg, "clock reads %v, outside 1970…2200", now)
	}
	if a == ratelimit.FixedWindow {
		c.WindowEnd = (c.Now/c.Period + 1) * c.Period
		return c, nil
	}
	c.Emission = ceilDiv(c.Period, l.Rate)
	c.Inc = n * c.Emission
	c.Tau = l.Burst * c.Emission
	return c, nil
}

// Key checks a rate-limit key: not empty, at most ratelimit.MaxKeyLen
// bytes, valid UTF-8 without NUL (PostgreSQL text holds nothing else).
func Key(pkg, key string) error {
	switch {
	case key == "":
		return Invalid(pkg, "empty key")
	case len(key) > ratelimit.MaxKeyLen:
		return Invalid(pkg, "key of %d bytes: at most %d", len(key), ratelimit.MaxKeyLen)
	case !utf8.ValidString(key):
		return Invalid(pkg, "%s is not valid UTF-8", ratelimit.KeyID(key))
	case strings.IndexByte(key, 0) >= 0:
		return Invalid(pkg, "%s contains a NUL byte", ratelimit.KeyID(key))
	}
	return nil
}

// Micros returns d in whole microseconds, rounded up.
func Micros(d time.Duration) int64 { return ceilDiv(int64(d), int64(time.Microsecond)) }

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

// WindowTTL is the time-to-live, in milliseconds, of a fixed-window
// counter started by this call: until its window ends, plus one period and
// one second, so that servers whose clocks lag by less than that still find
// the counter instead of starting it again. Only the window end stored
// with the count decides when a window is over; the TTL reclaims memory.
func (c Call) WindowTTL() int64 {
	return ceilDiv(c.WindowEnd-c.Now, 1000) + ceilDiv(c.Period, 1000) + 1000
}

// GCRAGraceMillis is how long, in milliseconds, a GCRA state outlives its
// theoretical arrival time: the state is worth nothing once the TAT has
// passed, and the second covers clocks that lag.
const GCRAGraceMillis = 1000

// WindowAllowed is the decision for an admitted fixed-window call: used is
// the window's count including this call, end the window's end.
func (c Call) WindowAllowed(used, end int64) ratelimit.Decision {
	return ratelimit.Decision{
		Allowed: true, Limit: c.Limit,
		Remaining:  max(c.Limit.Rate-used, 0),
		ResetAfter: us(max(end-c.Now, 0)),
	}
}

// WindowDenied is the decision for a refused fixed-window call whose
// window ends at end: the quota comes back then.
func (c Call) WindowDenied(end int64) ratelimit.Decision {
	wait := us(max(end-c.Now, 1))
	return ratelimit.Decision{Limit: c.Limit, RetryAfter: wait, ResetAfter: wait}
}

// GCRAAllowed is the decision for an admitted GCRA call whose new
// theoretical arrival time is tat.
func (c Call) GCRAAllowed(tat int64) ratelimit.Decision {
	ahead := tat - c.Now // ≤ τ
	return ratelimit.Decision{
		Allowed: true, Limit: c.Limit,
		Remaining:  max((c.Tau-ahead)/c.Emission, 0),
		ResetAfter: us(max(ahead, 0)),
	}
}

// GCRADenied is the decision for a refused GCRA call, given the stored
// theoretical arrival time tat (or Now when the key has none).
func (c Call) GCRADenied(tat int64) ratelimit.Decision {
	tat = max(tat, c.Now)
	return ratelimit.Decision{
		Limit:      c.Limit,
		RetryAfter: us(max(tat+c.Inc-c.Tau-c.Now, 1)),
		ResetAfter: us(tat - c.Now),
	}
}

// Model is the reference implementation of both algorithms, in memory, the
// way the Redis scripts and the SQL statements compute them. Tests run the
// same calls against a store and a Model and compare the decisions. The
// zero Model is empty and ready; it is not safe for concurrent use.
type Model struct {
	windows map[string][2]int64 // key -> window end, used
	tats    map[string]int64
}

// Decide applies c to key's state and returns the decision.
func (m *Model) Decide(key string, c Call) ratelimit.Decision {
	if c.Algo == ratelimit.FixedWindow {
		if m.windows == nil {
			m.windows = map[string][2]int64{}
		}
		w, ok := m.windows[key]
		if !ok || w[0] < c.WindowEnd { // a new window (GREATEST: never back to an older one)
			m.windows[key] = [2]int64{c.WindowEnd, c.N}
			return c.WindowAllowed(c.N, c.WindowEnd)
		}
		if w[1]+c.N > c.Limit.Rate {
			return c.WindowDenied(w[0])
		}
		w[1] += c.N
		m.windows[key] = w
		return c.WindowAllowed(w[1], w[0])
	}
	if m.tats == nil {
		m.tats = map[string]int64{}
	}
	tat, ok := m.tats[key]
	if !ok || tat < c.Now {
		tat = c.Now
	}
	next := tat + c.Inc
	if next-c.Now > c.Tau {
		return c.GCRADenied(tat)
	}
	m.tats[key] = next
	return c.GCRAAllowed(next)
}
