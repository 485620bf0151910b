package idempotency

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/problem"
)

// Defaults of Config.
const (
	// DefaultHeader is the request header that carries the key.
	DefaultHeader = "Idempotency-Key"
	// ReplayHeader marks a replayed response: "Idempotent-Replayed: true"
	// (the header Stripe uses). The first response does not carry it.
	ReplayHeader = "Idempotent-Replayed"
	// DefaultMaxBodyBytes bounds the request body the middleware reads to
	// fingerprint the request.
	DefaultMaxBodyBytes = 1 << 20
)

// defaultMethods are the methods the middleware protects by default: the
// ones that are not idempotent by definition (RFC 9110 §9.2.2).
var defaultMethods = []string{http.MethodPost, http.MethodPatch}

// defaultHeaders are the response headers stored and replayed by default:
// those that describe the body and what was created.
var defaultHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
	"Content-Location", "Location", "ETag", "Last-Modified",
}

// Config configures Middleware. A nil *Config, and every zero field, means
// the documented default. Middleware copies what it needs.
type Config struct {
	// Header is the request header carrying the key; default DefaultHeader.
	Header string
	// Required makes a request of a protected method without the header
	// an error (400). By default such a request runs unprotected, as if
	// the middleware were not there.
	Required bool
	// Methods are the protected methods; default POST and PATCH (the
	// methods that are not idempotent by definition, RFC 9110 §9.2.2).
	// Requests of other methods pass through untouched.
	Methods []string
	// Principal returns who is asking — a user, tenant or API key — from
	// the authenticated request: keys are unique per principal, so one
	// client's key never returns another's response. An error is answered
	// with 401. The default returns "" for every request: one namespace
	// shared by all clients, acceptable only when one client talks to the
	// service. Production services must set it (see PrincipalHeader).
	Principal func(r *http.Request) (string, error)
	// Fingerprint identifies the request the key was made for; a later
	// request with the same key and another fingerprint is answered with
	// 422. body is the request body, already read. The default is
	// Fingerprint(method, target, media type, body form, SHA-256(body)),
	// equal for two requests only when they are provably the same request:
	// the query in canonical order when it parses in full (else as sent),
	// the Content-Type's media type (so text/plain and application/json
	// differ), and a JSON body in canonical form (members sorted,
	// whitespace dropped) when it is valid UTF-8 with no duplicate member
	// names and no U+FFFD, else the bytes as sent. So a client that
	// re-serialises the same request on retry is not refused with 422,
	// while any change a server could see is. Set it to drop volatile
	// fields or canonicalize other formats.
	Fingerprint func(r *http.Request, body []byte) ([]byte, error)
	// Headers are the response headers stored and replayed; default
	// Content-Type, Content-Encoding, Content-Language,
	// Content-Disposition, Content-Location, Location, ETag and
	// Last-Modified. Other headers reach only the first response.
	Headers []string
	// MaxKeyLength bounds a key, in bytes; default DefaultMaxKeyLength.
	MaxKeyLength int
	// MaxBodyBytes bounds the request body (read in full to fingerprint
	// it); larger requests are answered with 413. Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// TTL, LockTimeout and Now are as in Options: defaults DefaultTTL,
	// DefaultLockTimeout (a crashed request's key may be taken over after
	// it) and time.Now.
	TTL         time.Duration
	LockTimeout time.Duration
	Now         func() time.Time
	// Logger receives the store's failures (the key could not be claimed;
	// a response could not be stored). Nil means slog.Default().
	Logger *slog.Logger
}

// PrincipalHeader returns a Config.Principal that reads the principal
// from header name, for services behind a gateway that authenticates
// clients and sets it (and strips any value the client sent). A missing
// header is an error (401).
func PrincipalHeader(name string) func(r *http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		if v := r.Header.Get(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("idempotency: no %s header", name)
	}
}

// middleware is a resolved Config.
type middleware struct {
	store        Store
	header       string
	required     bool
	methods      []string
	principal    func(*http.Request) (string, error)
	fingerprint  func(*http.Request, []byte) ([]byte, error)
	headers      []string
	maxKeyLength int
	maxBody      int64
	opts         resolved
	log          *slog.Logger
}

// Middleware returns net/http middleware that makes the handlers it wraps
// idempotent, following the IETF draft "The Idempotency-Key HTTP Header
// Field" (draft-ietf-httpapi-idempotency-key-header). It works with
// http.ServeMux and any router built on http.Handler. For a request of a
// protected method (Config.Methods) with a key (see ParseKey), it claims
// (principal, key) in the store (one round trip on PostgreSQL and
// DynamoDB), then:
//
//   - new key: runs the handler, capturing its response — status, headers,
//     body, 4xx and 5xx included; stores it (status, Config.Headers, body)
//     and unlocks the key; then sends it. The body is buffered, so a
//     handler's Flush has no effect until it returns.
//   - completed key: replays the stored response byte for byte, with
//     "Idempotent-Replayed: true"; the handler does not run.
//   - key held by a request still running: 409 Conflict.
//   - key used with another request (Config.Fingerprint differs): 422.
//   - key whose holder crashed (held longer than Config.LockTimeout), or
//     released by a handler that panicked: the handler runs again.
//
// A request rejected before its handler ran — a missing (with Required)
// or invalid key: 400; an unreadable or too large body: 400, 413; no
// principal: 401; the store failing to claim: 503 — stores nothing, so its
// key stays usable. Errors are RFC 9457 problem+json. A handler that
// panics leaves its key released (retryable) and the panic goes on. If
// the response cannot be stored, it is still sent (the handler's effects
// happened) and logged; the key then stays locked until LockTimeout.
//
// Errors: concurkit.ErrInvalidArgument for a nil store or an invalid
// Config (TTL ≤ LockTimeout, negative values, an invalid header name).
func Middleware(s Store, cfg *Config) (func(http.Handler) http.Handler, error) {
	if handle.IsNil(s) {
		return nil, invalid("nil store")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	m := &middleware{
		store: s, header: c.Header, required: c.Required, principal: c.Principal,
		fingerprint: c.Fingerprint, maxKeyLength: c.MaxKeyLength, maxBody: c.MaxBodyBytes, log: c.Logger,
	}
	var err error
	if m.opts, err = resolve(c.TTL, c.LockTimeout, c.Now); err != nil {
		return nil, err
	}
	if m.header == "" {
		m.header = DefaultHeader
	}
	if !validToken(m.header) {
		return nil, invalid("header name %q", m.header)
	}
	m.methods = slices.Clone(c.Methods)
	if m.methods == nil {
		m.methods = defaultMethods
	}
	headers := c.Headers
	if headers == nil {
		headers = defaultHeaders
	}
	for _, h := range headers {
		if !validToken(h) {
			return nil, invalid("response header name %q", h)
		}
		m.headers = append(m.headers, http.CanonicalHeaderKey(h))
	}
	switch {
	case m.maxKeyLength < 0 || m.maxBody < 0:
		return nil, invalid("negative MaxKeyLength or MaxBodyBytes")
	case m.maxKeyLength == 0:
		m.maxKeyLength = DefaultMaxKeyLength
	}
	if m.maxBody == 0 {
		m.maxBody = DefaultMaxBodyBytes
	}
	if m.principal == nil {
		m.principal = func(*http.Request) (string, error) { return "", nil }
	}
	if m.fingerprint == nil {
		m.fingerprint = requestFingerprint
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !slices.Contains(m.methods, r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	values := r.Header.Values(m.header)
	switch {
	case len(values) == 0 && !m.required:
		next.ServeHTTP(w, r)
		return
	case len(values) == 0:
		fail(w, http.StatusBadRequest, "This request requires an "+m.header+" header.")
		return
	case len(values) > 1:
		fail(w, http.StatusBadRequest, "The request has more than one "+m.header+" header.")
		return
	}
	key, err := ParseKey(values[0], m.maxKeyLength)
	if err != nil {
		fail(w, http.StatusBadRequest, "Invalid "+m.header+": "+err.Error())
		return
	}
	principal, err := m.principal(r)
	if err != nil {
		fail(w, http.StatusUnauthorized, "The request's principal is unknown.")
		return
	}
	if err := checkPrincipal(principal); err != nil {
		fail(w, http.StatusBadRequest, "Invalid principal: "+err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body exceeds %d bytes.", m.maxBody))
			return
		}
		fail(w, http.StatusBadRequest, "The request body could not be read.")
		return
	}
	fp, err := m.fingerprint(r, body)
	if err != nil {
		fail(w, http.StatusBadRequest, "The request could not be fingerprinted: "+err.Error())
		return
	}
	req := m.opts.request(principal, key, fp)
	rec, oc, err := claim(r.Context(), m.store, req)
	if err != nil {
		m.log.ErrorContext(r.Context(), "idempotency: claim failed", "key", key, "err", err)
		fail(w, http.StatusServiceUnavailable, "The idempotency key store is unavailable; the request did not run and may be retried.")
		return
	}
	switch oc {
	case inProgress:
		fail(w, http.StatusConflict, "A request with this "+m.header+" is still being processed; retry later.")
		return
	case mismatch:
		fail(w, http.StatusUnprocessableEntity, "This "+m.header+" was used with a different request.")
		return
	case completed:
		replay(w, rec.Response)
		return
	}
	lock := Lock{Principal: principal, Key: key, ID: req.LockID}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	rw := &recorder{header: http.Header{}}
	_, _ = runLocked(r.Context(), m.store, lock, func() (struct{}, error) {
		next.ServeHTTP(rw, r)
		return struct{}{}, nil
	})
	resp := rw.response()
	stored := Response{Status: resp.Status, Header: http.Header{}, Body: resp.Body}
	for _, h := range m.headers {
		if v, ok := resp.Header[h]; ok {
			stored.Header[h] = v
		}
	}
	cctx, cancel := cleanupContext(r.Context())
	err = m.store.Complete(cctx, lock, stored, m.opts.now().Add(m.opts.ttl))
	cancel()
	if err != nil {
		m.log.ErrorContext(r.Context(), "idempotency: response not stored; the key stays locked until the lock timeout",
			"key", key, "status", resp.Status, "err", err)
	}
	send(w, resp, false)
}

// fail answers with a problem+json document of status.
func fail(w http.ResponseWriter, status int, detail string) {
	problem.Write(w, problem.Details{Status: status, Detail: detail})
}

// replay sends a stored response, marked.
func replay(w http.ResponseWriter, resp *Response) {
	send(w, *resp, true)
}

func send(w http.ResponseWriter, resp Response, replayed bool) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = slices.Clone(v)
	}
	if replayed {
		h.Set(ReplayHeader, "true")
	}
	if bodyAllowed(resp.Status) {
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	w.WriteHeader(resp.Status)
	if bodyAllowed(resp.Status) {
		_, _ = w.Write(resp.Body)
	}
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && status >= 200
}

// recorder captures a handler's response.
type recorder struct {
	header http.Header
	status int
	sent   http.Header // the header as it was at WriteHeader
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	if r.status != 0 || code < 200 {
		// A second call is ignored, as net/http does; informational
		// responses (103 Early Hints) cannot be replayed and are dropped.
		return
	}
	r.status = code
	r.sent = r.header.Clone()
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.body.Write(b)
}

// Flush does nothing: the response is sent when the handler returns.
func (r *recorder) Flush() {}

// response returns what the handler produced, with net/http's defaults:
// status 200, and a sniffed Content-Type when the handler set none, so
// that the stored response is the one sent.
func (r *recorder) response() Response {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	body := r.body.Bytes()
	if _, ok := r.sent["Content-Type"]; !ok && len(body) > 0 && bodyAllowed(r.status) {
		r.sent.Set("Content-Type", http.DetectContentType(body))
	}
	return Response{Status: r.status, Header: r.sent, Body: body}
}

// validToken reports whether s is an HTTP token (a valid field name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
			return false
		}
	}
	return true
}
