package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
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
	// DefaultMaxResponseBytes bounds the response body the middleware
	// buffers to store (see Config.MaxResponseBytes).
	DefaultMaxResponseBytes = 1 << 20
)

// ResponseNotStoredType is the problem type (RFC 9457) of the 410 Gone a
// retry gets when the original response was too large to store
// (ErrResponseTooLarge): the request ran to completion once and will not
// run again; the document's "original-status" member is the status the
// first response had, and "original-location" its Location, if any.
const ResponseNotStoredType = "https://pkg.go.dev/github.com/concurkit/concurkit/idempotency#ResponseNotStoredType"

// DefaultNotExecuted is the default Config.NotExecuted: 429 Too Many
// Requests (a rate limiter refused the request, RFC 6585) and 503 Service
// Unavailable (a temporary condition the client is told to retry, RFC
// 9110 §15.6.4) mean that the request did not execute.
func DefaultNotExecuted(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

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
	// MaxResponseBytes bounds the response body the middleware buffers to
	// store; default DefaultMaxResponseBytes (1 MiB). A handler that
	// writes more has its response streamed to the client as it writes
	// (memory stays bounded) and not stored: the key keeps a marker
	// instead, so that a retry gets 410 Gone (ResponseNotStoredType) and
	// the handler never runs again. A response within the bound that the
	// store cannot keep (DynamoDB's 400 KB item, MariaDB's
	// max_allowed_packet) gets the same marker.
	MaxResponseBytes int64
	// NotExecuted reports whether a response status of the handler means
	// that the request was not executed — refused before it had any
	// effect — and may be retried as it is. Such a response is sent but
	// not stored, and the key is released, so that a retry with the same
	// key runs the handler. Nil means DefaultNotExecuted (429 and 503): a
	// rate limiter inside the middleware (see Middleware) refuses with
	// 429, which must not become the key's stored result. A handler must
	// not answer such a status after its effects committed.
	NotExecuted func(status int) bool
	// TTL, LockTimeout and Now are as in Options: defaults DefaultTTL,
	// DefaultLockTimeout (a crashed request's key may be taken over after
	// it; the handler's context ends at 9/10 of it after the claim) and
	// time.Now. Now dates the stored keys; the handler's deadline is
	// measured by the real clock.
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
	maxResponse  int64
	notExecuted  func(int) bool
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
//     and unlocks the key; then sends it. The body is buffered up to
//     Config.MaxResponseBytes, so a handler's Flush has no effect until it
//     returns; a larger body is streamed and not stored (see below).
//   - completed key: replays the stored response byte for byte, with
//     "Idempotent-Replayed: true"; the handler does not run.
//   - key held by a request still running: 409 Conflict.
//   - key used with another request (Config.Fingerprint differs): 422.
//   - key whose holder crashed (held longer than Config.LockTimeout), or
//     released (see below): the handler runs again.
//
// Once a request has claimed its key, its handler runs to completion
// whatever the client does: the handler's request context keeps the
// client's values but does not end when the client disconnects or its
// deadline passes, as payment APIs behave. A client that gave up retries
// with the same key and gets 409 while the first run goes on, then the
// response that run produced. The handler's context does end at 9/10 of
// Config.LockTimeout after the claim, leaving the rest (and the clocks'
// skew between servers) for storing the response, so that a handler that
// honours its context never overlaps a retry that takes its key over. A
// client whose context ended before the claim runs nothing.
//
// What is stored, then, is only ever the response of a handler that ran
// with its context live:
//
//   - the response the handler decided (its status written, or the
//     handler returned without writing: an empty 200, as net/http sends)
//     while its context was live is stored;
//   - a handler still running when its context ended (its status written
//     after that, or never) cannot tell what it did: nothing is stored,
//     the key is released and a retry runs the handler again. The client
//     gets what the handler wrote, or 503 if it wrote nothing;
//   - a status that Config.NotExecuted reports (429 and 503 by default)
//     is sent, not stored, and the key released;
//   - a response that cannot be stored (larger than MaxResponseBytes or
//     than the store can keep) is sent, and the key completed with a
//     marker: a retry gets 410 Gone, problem+json of type
//     ResponseNotStoredType, and the handler does not run again.
//
// A rate limiter (package ratelimit) goes inside the idempotency
// middleware, next to the handler: mw(limit(handler)). Then a replay, a
// 409 and a 422 never reach the limiter, so they consume no quota and are
// never refused, and a 429 is not stored (NotExecuted): the retry runs
// once the quota allows. With the limiter outside, replays would consume
// quota and be refused with 429.
//
// A request rejected before its handler ran — a missing (with Required)
// or invalid key: 400; an unreadable or too large body: 400, 413; no
// principal: 401; the store failing to claim: 503 — stores nothing, so its
// key stays usable. Errors are RFC 9457 problem+json. A handler that
// panics leaves its key released (retryable) and the panic goes on. If
// the response cannot be stored for another reason (the store fails), it
// is still sent (the handler's effects happened) and logged; the key then
// stays locked until LockTimeout.
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
		fingerprint: c.Fingerprint, maxKeyLength: c.MaxKeyLength, maxBody: c.MaxBodyBytes,
		maxResponse: c.MaxResponseBytes, notExecuted: c.NotExecuted, log: c.Logger,
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
	case m.maxKeyLength < 0 || m.maxBody < 0 || m.maxResponse < 0:
		return nil, invalid("negative MaxKeyLength, MaxBodyBytes or MaxResponseBytes")
	case m.maxKeyLength == 0:
		m.maxKeyLength = DefaultMaxKeyLength
	}
	if m.maxBody == 0 {
		m.maxBody = DefaultMaxBodyBytes
	}
	if m.maxResponse == 0 {
		m.maxResponse = DefaultMaxResponseBytes
	}
	if m.notExecuted == nil {
		m.notExecuted = DefaultNotExecuted
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
	if r.Context().Err() != nil {
		return // the client is gone: nothing runs, nothing is stored, nobody to answer
	}
	start := time.Now()
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
	// The handler's context: the client's values, not its cancellation,
	// and an end well before the lock can be taken over.
	deadline := start.Add(runBudget(m.opts.lockTimeout))
	if !time.Now().Before(deadline) {
		release(r.Context(), m.store, lock) // the claim took the lock's whole time
		fail(w, http.StatusServiceUnavailable, "The idempotency key store is too slow; the request did not run and may be retried.")
		return
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), deadline)
	defer cancel()
	r = r.WithContext(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	rw := &recorder{client: w, ctx: ctx, deadline: deadline, max: m.maxResponse, header: http.Header{}}
	_, _ = runLocked(ctx, m.store, lock, func() (struct{}, error) {
		defer rw.done()
		next.ServeHTTP(rw, r)
		return struct{}{}, nil
	})
	m.finish(ctx, w, rw, lock, key)
}

// runBudget is how long after its claim a handler may run: 9/10 of the
// lock timeout. The rest is for storing its response, and for the skew
// between the clock of this process, which dated the lock, and that of a
// retry's process, which decides when it has timed out.
func runBudget(lockTimeout time.Duration) time.Duration {
	return lockTimeout - lockTimeout/10
}

// finish stores or releases the key after the handler returned, and sends
// the response unless it was streamed.
func (m *middleware) finish(ctx context.Context, w http.ResponseWriter, rw *recorder, lock Lock, key string) {
	resp, decided := rw.response()
	switch {
	case !decided:
		// The handler's context ended (the lock-timeout bound) before it
		// answered: what it did is unknown, and what it wrote may be a
		// consequence of the cancellation. Store nothing; a retry runs it
		// again.
		release(ctx, m.store, lock)
		m.log.WarnContext(ctx, "idempotency: the handler outlived its context (9/10 of the lock timeout); nothing stored, the key released",
			"key", key, "status", resp.Status)
		if rw.streamed {
			return
		}
		if rw.implicit {
			fail(w, http.StatusServiceUnavailable, "The request did not finish in time; its outcome is unknown. A retry with the same "+m.header+" runs it again.")
			return
		}
		send(w, resp, false)
		return
	case m.notExecuted(resp.Status):
		release(ctx, m.store, lock)
	default:
		stored := Response{Status: resp.Status, Header: http.Header{}, Body: resp.Body}
		for _, h := range m.headers {
			if v, ok := resp.Header[h]; ok {
				stored.Header[h] = v
			}
		}
		marker := notStored(resp.Status, rw.size, resp.Header.Get("Location"))
		cctx, cancel := cleanupContext(ctx)
		var err error
		if rw.streamed {
			err = m.store.Complete(cctx, lock, marker, m.opts.now().Add(m.opts.ttl))
		} else if err = m.store.Complete(cctx, lock, stored, m.opts.now().Add(m.opts.ttl)); errors.Is(err, ErrResponseTooLarge) {
			err = m.store.Complete(cctx, lock, marker, m.opts.now().Add(m.opts.ttl))
		}
		cancel()
		switch {
		case errors.Is(err, ErrLockLost):
			m.log.ErrorContext(ctx, "idempotency: response not stored: the run outlived the lock timeout and its key was taken over",
				"key", key, "status", resp.Status, "err", err)
		case err != nil:
			m.log.ErrorContext(ctx, "idempotency: response not stored; the key stays locked until the lock timeout",
				"key", key, "status", resp.Status, "err", err)
		}
	}
	if !rw.streamed {
		send(w, resp, false)
	}
}

// notStored is the marker a key keeps when the response of its completed
// run (status, size bytes, Location) cannot be stored: a 410 problem+json
// of type ResponseNotStoredType.
func notStored(status int, size int64, location string) Response {
	extra := map[string]any{"original-status": status}
	if location != "" {
		extra["original-location"] = location
	}
	rec := &recorder{header: http.Header{}, max: math.MaxInt64}
	problem.Write(rec, problem.Details{
		Type:   ResponseNotStoredType,
		Title:  "Response not stored",
		Status: http.StatusGone,
		Detail: fmt.Sprintf("The request with this key ran to completion (status %d), but its response (%d bytes) was too large to store; it cannot be replayed, and the request does not run again.", status, size),
		Extra:  extra,
	})
	resp, _ := rec.response()
	resp.Header = http.Header{"Content-Type": resp.Header["Content-Type"], "Cache-Control": resp.Header["Cache-Control"]}
	return resp
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

// recorder captures a handler's response: status, headers and body up to
// max bytes. Beyond max it streams the response to client instead (its
// status, headers and the body so far, then every write), with a write
// deadline at the handler's deadline, so that a slow client cannot hold
// the handler past it. Writes to a client that is gone are not reported
// to the handler, which runs to completion whatever the client does.
type recorder struct {
	client   http.ResponseWriter // nil: never stream
	ctx      context.Context     // the handler's; nil: always live
	deadline time.Time
	max      int64

	header   http.Header
	status   int
	sent     http.Header // the header as it was at WriteHeader
	live     bool        // the handler's context was live when the status was decided
	implicit bool        // the handler wrote nothing: net/http's empty 200
	body     bytes.Buffer
	size     int64 // body bytes the handler wrote
	streamed bool
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
	r.live = r.ctx == nil || r.ctx.Err() == nil
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	r.size += int64(len(b))
	if !r.streamed && r.client != nil && int64(r.body.Len())+int64(len(b)) > r.max {
		r.stream(b)
	}
	if r.streamed {
		_, _ = r.client.Write(b) // a client that is gone does not stop the handler
		return len(b), nil
	}
	return r.body.Write(b)
}

// stream starts sending the response to the client: it is too large to
// buffer. next is the write that does not fit.
func (r *recorder) stream(next []byte) {
	r.streamed = true
	rc := http.NewResponseController(r.client)
	_ = rc.SetWriteDeadline(r.deadline) // not every ResponseWriter supports it
	h := r.client.Header()
	for k, v := range r.sent {
		h[k] = v
	}
	if _, ok := r.sent["Content-Type"]; !ok && bodyAllowed(r.status) {
		sniff := append(slices.Clip(r.body.Bytes()), next[:min(len(next), 512)]...)
		h.Set("Content-Type", http.DetectContentType(sniff))
	}
	r.client.WriteHeader(r.status)
	_, _ = r.client.Write(r.body.Bytes())
	r.body = bytes.Buffer{}
}

// Flush does nothing while the response is buffered: it is sent when the
// handler returns. A streamed response is flushed.
func (r *recorder) Flush() {
	if r.streamed {
		_ = http.NewResponseController(r.client).Flush()
	}
}

// done records that the handler returned; an empty 200 is decided then.
func (r *recorder) done() {
	if r.status == 0 {
		r.implicit = true
		r.WriteHeader(http.StatusOK)
	}
	if r.streamed {
		_ = http.NewResponseController(r.client).SetWriteDeadline(time.Time{}) // the connection may serve other requests
	}
}

// response returns what the handler produced, with net/http's defaults:
// status 200, and a sniffed Content-Type when the handler set none, so
// that the stored response is the one sent (Body is nil once streamed);
// decided reports whether the handler's context was live when its status
// was settled.
func (r *recorder) response() (resp Response, decided bool) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	body := r.body.Bytes()
	if _, ok := r.sent["Content-Type"]; !ok && len(body) > 0 && bodyAllowed(r.status) {
		r.sent.Set("Content-Type", http.DetectContentType(body))
	}
	return Response{Status: r.status, Header: r.sent, Body: body}, r.live
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
