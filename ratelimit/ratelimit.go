package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/concurkit/concurkit"
)

// Bounds of a Limit and of a key. They keep every computation of the
// stores exact: times are counted in whole microseconds since the Unix
// epoch, which Redis's Lua (whose numbers are doubles, exact up to 2^53)
// and PostgreSQL's timestamps hold without rounding until the year 2200.
const (
	// MaxPeriod is the longest Limit.Period, and the longest time a GCRA
	// burst may take to refill (Burst × Period / Rate): ten years.
	MaxPeriod = 10 * 365 * 24 * time.Hour
	// MaxQuota bounds Limit.Rate, Limit.Burst and the cost n of AllowN.
	MaxQuota int64 = 1 << 50
	// MaxKeyLen is the longest key, in bytes. Hash longer identifiers.
	MaxKeyLen = 1024
)

// KeyID returns how this package and its adapters name key in errors:
// "key#" and the first 12 hex digits of the key's SHA-256. Rate-limit keys
// are often secrets (an API key) or personal data (a user id, an address),
// and errors end up in logs, so no error of ratelimit, ratelimitredis or
// ratelimitpg contains the key itself; compute KeyID of a key you know to
// find its errors.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key#" + hex.EncodeToString(sum[:6])
}

// Algorithm selects how a Limiter counts.
type Algorithm int

const (
	// GCRA is the generic cell rate algorithm (a leaky bucket as a meter,
	// the algorithm of redis_rate and throttled), the default: requests
	// are spaced Period/Rate apart on average, with up to Burst at once.
	// It stores one timestamp per key, has no window boundaries and
	// therefore no burst of 2×Rate across a boundary.
	GCRA Algorithm = iota
	// FixedWindow admits at most Rate requests in each window of length
	// Period. Windows are aligned to the Unix epoch: per-minute windows
	// start at second :00, per-day windows at 00:00 UTC, the same for
	// every key and every server.
	FixedWindow
)

// String returns "gcra" or "fixed-window".
func (a Algorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case FixedWindow:
		return "fixed-window"
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// Limit is a quota: Rate requests per Period. The zero Limit is invalid.
//
// For GCRA, Burst is how many requests may pass at once (the bucket's
// size); zero means Rate. For FixedWindow, Burst must be zero or Rate: a
// fixed window admits its whole quota at once by design.
//
// Period is rounded up to a whole microsecond, and so is GCRA's emission
// interval Period/Rate: the stores count in microseconds. Rounding up
// never admits more than the Limit; a GCRA rate whose interval is not a
// whole number of microseconds is lower by less than one microsecond per
// request.
type Limit struct {
	Rate   int64         // requests per Period, 1…MaxQuota
	Period time.Duration // 1 µs…MaxPeriod
	Burst  int64         // GCRA: requests at once, 0 = Rate; FixedWindow: 0 or Rate
}

// String describes l, e.g. "100 per 1m0s (burst 10)".
func (l Limit) String() string {
	s := strconv.FormatInt(l.Rate, 10) + " per " + l.Period.String()
	if l.Burst != 0 && l.Burst != l.Rate {
		s += " (burst " + strconv.FormatInt(l.Burst, 10) + ")"
	}
	return s
}

// Validate reports whether l is a valid limit for algorithm a: Rate in
// 1…MaxQuota, Period in 1 µs…MaxPeriod, and Burst as described on Limit;
// for GCRA also at most one request per microsecond (Period/Rate ≥ 1 µs)
// and a burst that refills within MaxPeriod. It returns nil or an error
// matching concurkit.ErrInvalidArgument. Limiters validate every call;
// Validate lets a service check its configuration at start-up.
func (l Limit) Validate(a Algorithm) error {
	_, err := l.resolve(a)
	return err
}

func (l Limit) resolve(a Algorithm) (Limit, error) {
	bad := func(format string, args ...any) (Limit, error) {
		return l, fmt.Errorf("%w: ratelimit: limit %v: "+format, append([]any{concurkit.ErrInvalidArgument, l}, args...)...)
	}
	switch {
	case a != GCRA && a != FixedWindow:
		return bad("unknown algorithm %v", a)
	case l.Rate <= 0 || l.Rate > MaxQuota:
		return bad("Rate must be in 1…%d", MaxQuota)
	case l.Period <= 0 || l.Period > MaxPeriod:
		return bad("Period must be in (0, %v]", MaxPeriod)
	case l.Burst < 0 || l.Burst > MaxQuota:
		return bad("Burst must be in 0…%d", MaxQuota)
	}
	if l.Burst == 0 {
		l.Burst = l.Rate
	}
	periodUs := micros(l.Period)
	if a == FixedWindow {
		if l.Burst != l.Rate {
			return bad("a fixed window has no Burst (set 0 or Rate)")
		}
		return l, nil
	}
	if l.Rate > periodUs {
		return bad("more than one request per microsecond")
	}
	emission := ceilDiv(periodUs, l.Rate)
	if l.Burst > micros(MaxPeriod)/emission {
		return bad("a burst of %d takes longer than %v to refill", l.Burst, MaxPeriod)
	}
	return l, nil
}

// micros returns d in whole microseconds, rounded up (d > 0).
func micros(d time.Duration) int64 {
	return ceilDiv(int64(d), int64(time.Microsecond))
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}

// Decision is a limiter's answer for one request.
type Decision struct {
	// Allowed reports whether the request may proceed. A request that is
	// not allowed was not counted.
	Allowed bool
	// Limit is the limit applied, with its defaults (Burst) resolved.
	Limit Limit
	// Remaining is the quota left after this request: how many more
	// requests of cost 1 would be allowed right now. It is 0 when the
	// request was not allowed (as in redis_rate).
	Remaining int64
	// RetryAfter is how long to wait before the same request can be
	// allowed: 0 when allowed, more than 0 when not.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full quota
	// (Remaining = Rate for a fixed window, Burst for GCRA): the end of
	// the current window, or the time GCRA takes to drain what was used.
	ResetAfter time.Duration
}

// Limiter decides whether requests may proceed. The implementations in
// ratelimitredis and ratelimitpg count exactly across any number of
// processes sharing one store: with limit L, at most L requests of one key
// are ever allowed per window (FixedWindow) and at most Burst at once
// (GCRA), however many servers ask at the same time.
type Limiter interface {
	// AllowN counts a request of cost n (usually 1) against key's limit
	// and reports whether it may proceed; a request that is denied is not
	// counted. Bad input (an empty or too long key, an invalid limit for
	// the Limiter's algorithm, n < 1 or n more than the limit can ever
	// admit) is an error matching concurkit.ErrInvalidArgument, returned
	// before any I/O. Other errors come from the store; the request may or
	// may not have been counted.
	AllowN(ctx context.Context, key string, limit Limit, n int64) (Decision, error)
}
