package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/problem"
)

// Defaults of the zero Config fields.
const (
	// DefaultPolicy names the quota policy in the RateLimit headers.
	DefaultPolicy = "default"
	// DefaultTimeout bounds each decision of the middleware.
	DefaultTimeout = time.Second
)

// QuotaExceededType is the problem type of a 429 answer: the
// "quota-exceeded" type that draft-ietf-httpapi-ratelimit-headers registers,
// with the extension member "violated-policies".
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Config configures Middleware. Limit is required unless LimitFor is set;
// every other zero field means its documented default. Middleware copies
// the Config.
type Config struct {
	// Limit applies to every key (required unless LimitFor is set).
	Limit Limit
	// LimitFor, if not nil, returns the limit of a request instead of
	// Limit: per-key limits (plans, tiers). An invalid limit it returns
	// is answered 500, never let through.
	LimitFor func(r *http.Request, key string) Limit
	// Key returns the rate-limit key of a request, for example the API key
	// or the user id. Nil means ClientIP. A Key that returns "" is a bug,
	// answered 500. Keys from headers a client controls (X-Forwarded-For)
	// are only as trustworthy as the proxy that sets them.
	Key func(r *http.Request) string
	// Policy names the quota policy in the RateLimit and RateLimit-Policy
	// headers and in the 429 problem's "violated-policies": printable
	// ASCII. Empty means DefaultPolicy.
	Policy string
	// FailOpen lets requests through, without RateLimit headers, when the
	// limiter cannot decide (its store fails or does not answer within
	// Timeout). The default, false, answers 503 Service Unavailable: a
	// limiter that stops counting when its store is down no longer
	// enforces its limit, and concurkit does not exceed a limit silently.
	// Choose FailOpen when availability matters more than the limit.
	// Bad input (an invalid limit, an empty key) is answered 500 either
	// way.
	FailOpen bool
	// Timeout bounds each decision (with the request's own deadline).
	// Zero means DefaultTimeout; negative is bad input. A go-redis client
	// applies it to the socket only with ContextTimeoutEnabled; otherwise
	// a hung Redis server holds the request until the client's
	// ReadTimeout.
	Timeout time.Duration
	// OnError, if not nil, is called with every error of the limiter (to
	// log it) before the middleware answers 503 or 500 or, with FailOpen,
	// lets the request through.
	OnError func(r *http.Request, err error)
}

// Middleware returns net/http middleware that asks l about every request
// before calling the next handler, with the request's key (Config.Key) and
// limit (Config.Limit or LimitFor):
//
//   - allowed: the next handler runs, and the response carries the
//     RateLimit-Policy and RateLimit headers (WriteHeaders);
//   - denied: 429 Too Many Requests with those headers, Retry-After in
//     whole seconds (rounded up) and an RFC 9457 problem+json body of type
//     QuotaExceededType; the next handler does not run;
//   - l fails: 503 problem+json (or, with Config.FailOpen, the next
//     handler runs); bad input from l: 500.
//
// It works with http.ServeMux and any router that takes an http.Handler.
// It returns an error matching concurkit.ErrInvalidArgument for a nil l
// (also a typed nil), a nil cfg or a Config without a valid Limit (nor a
// LimitFor), a Policy that is not printable ASCII, or a negative Timeout.
func Middleware(l Limiter, cfg *Config) (func(http.Handler) http.Handler, error) {
	if handle.IsNil(l) {
		return nil, fmt.Errorf("%w: ratelimit: nil Limiter", concurkit.ErrInvalidArgument)
	}
	if cfg == nil {
		return nil, fmt.Errorf("%w: ratelimit: nil Config (Limit is required)", concurkit.ErrInvalidArgument)
	}
	m := middleware{l: l, cfg: *cfg}
	if m.cfg.LimitFor == nil {
		// The algorithm is the Limiter's: accept a limit valid for either.
		if err := m.cfg.Limit.Validate(GCRA); err != nil {
			if m.cfg.Limit.Validate(FixedWindow) != nil {
				return nil, err
			}
		}
	}
	if m.cfg.Key == nil {
		m.cfg.Key = ClientIP
	}
	if m.cfg.Policy == "" {
		m.cfg.Policy = DefaultPolicy
	}
	for i := 0; i < len(m.cfg.Policy); i++ {
		if c := m.cfg.Policy[i]; c < 0x20 || c > 0x7e {
			return nil, fmt.Errorf("%w: ratelimit: Policy %q: printable ASCII only", concurkit.ErrInvalidArgument, m.cfg.Policy)
		}
	}
	switch {
	case m.cfg.Timeout < 0:
		return nil, fmt.Errorf("%w: ratelimit: negative Timeout %v", concurkit.ErrInvalidArgument, m.cfg.Timeout)
	case m.cfg.Timeout == 0:
		m.cfg.Timeout = DefaultTimeout
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

type middleware struct {
	l   Limiter
	cfg Config
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key := m.cfg.Key(r)
	limit := m.cfg.Limit
	if m.cfg.LimitFor != nil && key != "" {
		limit = m.cfg.LimitFor(r, key)
	}
	var d Decision
	var err error
	if key == "" {
		err = fmt.Errorf("%w: ratelimit: Config.Key returned an empty key", concurkit.ErrInvalidArgument)
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), m.cfg.Timeout)
		d, err = m.l.AllowN(ctx, key, limit, 1)
		cancel()
	}
	if err != nil {
		if m.cfg.OnError != nil {
			m.cfg.OnError(r, err)
		}
		switch {
		case errors.Is(err, concurkit.ErrInvalidArgument):
			// A misconfiguration never opens the gate.
			problem.Write(w, problem.Details{Status: http.StatusInternalServerError, Detail: "rate limiter misconfigured"})
		case m.cfg.FailOpen:
			next.ServeHTTP(w, r)
		default:
			problem.Write(w, problem.Details{Status: http.StatusServiceUnavailable, Detail: "rate limiter unavailable"})
		}
		return
	}
	WriteHeaders(w.Header(), m.cfg.Policy, d)
	if !d.Allowed {
		wait := seconds(d.RetryAfter)
		w.Header().Set("Retry-After", strconv.FormatInt(wait, 10))
		problem.Write(w, problem.Details{
			Type:   QuotaExceededType,
			Title:  "Request cannot be satisfied as assigned quota has been exceeded",
			Status: http.StatusTooManyRequests,
			Detail: "retry after " + strconv.FormatInt(wait, 10) + " s",
			Extra:  map[string]any{"violated-policies": []string{m.cfg.Policy}},
		})
		return
	}
	next.ServeHTTP(w, r)
}

// WriteHeaders sets the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers-10 (structured fields, RFC 9651)
// for decision d under the quota policy named policy, e.g.
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=0;t=30
//
// q is d.Limit.Rate; w is d.Limit.Period in seconds, left out when the
// period is not a whole number of seconds (the draft has no sub-second
// windows). r is d.Remaining; t is, in whole seconds rounded up, the time
// until the quota is whole again (d.ResetAfter) or, for a denied request,
// d.RetryAfter, so that t is never later than the Retry-After of the same
// response. For GCRA, t is conservative: quota comes back gradually,
// before t. Characters of policy outside printable ASCII are replaced by
// '?'; the middleware rejects such names up front.
func WriteHeaders(h http.Header, policy string, d Decision) {
	name := sfString(policy)
	p := name + ";q=" + strconv.FormatInt(d.Limit.Rate, 10)
	if d.Limit.Period >= time.Second && d.Limit.Period%time.Second == 0 {
		p += ";w=" + strconv.FormatInt(int64(d.Limit.Period/time.Second), 10)
	}
	h.Set("RateLimit-Policy", p)
	t := d.ResetAfter
	if !d.Allowed {
		t = d.RetryAfter
	}
	h.Set("RateLimit", name+";r="+strconv.FormatInt(d.Remaining, 10)+";t="+strconv.FormatInt(seconds(t), 10))
}

// seconds rounds d up to whole seconds, at least 1 for d > 0: a client
// told to come back never comes back too early.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfString encodes s as a structured-field String.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ClientIP is the default Config.Key: the client's address from
// r.RemoteAddr (the peer of the connection, not a forwarded header). An
// IPv6 client is keyed by its /64 prefix, the block one subscriber
// usually holds, so that it cannot dodge its limit by changing addresses
// within it. An unparsable RemoteAddr is used as is.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
