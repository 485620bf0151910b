package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/concurkit/concurkit/internal/handle"
)

// Options configure Do and DoPhases, per call. A nil *Options, and every
// zero field, means the documented default. Do never modifies it.
type Options struct {
	// TTL is how long the key is kept after its last run. Zero means
	// DefaultTTL. It must exceed LockTimeout.
	TTL time.Duration
	// LockTimeout is how long a run may hold the key (for DoPhases: may
	// spend in one phase) before another call may take it over, presuming
	// the holder crashed. Zero means DefaultLockTimeout. A run that
	// outlives it is fenced off: its result is refused with ErrLockLost.
	LockTimeout time.Duration
	// Now is the clock; nil means time.Now. Tests inject one to move
	// through lock timeouts and expiry without sleeping. Every process
	// sharing a store must have roughly the same time: skew shortens or
	// lengthens LockTimeout and TTL by as much.
	Now func() time.Time
	// StoreError says whether an error of fn (for DoPhases, of a phase or
	// of finish) is a final result, stored and replayed to every retry as
	// a *ReplayedError (a card declined, say). Nil, or false, releases the
	// key instead: the error is returned and a retry runs fn again (from
	// the last recovery point, for DoPhases). Errors that match
	// context.Canceled, context.DeadlineExceeded or ErrLockLost are never
	// stored, nor any error returned after ctx ended (it may be a
	// consequence of the cancellation).
	StoreError func(err error) bool
}

// resolved is Options with defaults applied.
type resolved struct {
	ttl, lockTimeout time.Duration
	now              func() time.Time
	storeError       func(error) bool
}

func resolve(ttl, lockTimeout time.Duration, now func() time.Time) (resolved, error) {
	r := resolved{ttl: ttl, lockTimeout: lockTimeout, now: now}
	if r.ttl == 0 {
		r.ttl = DefaultTTL
	}
	if r.lockTimeout == 0 {
		r.lockTimeout = DefaultLockTimeout
	}
	if r.now == nil {
		r.now = time.Now
	}
	switch {
	case r.ttl < 0 || r.lockTimeout < 0:
		return r, invalid("negative TTL %v or LockTimeout %v", ttl, lockTimeout)
	case r.ttl <= r.lockTimeout:
		// An expired key is treated as absent: if it could expire while
		// its lock is still valid, a second run could start beside the
		// first.
		return r, invalid("TTL %v must exceed LockTimeout %v", r.ttl, r.lockTimeout)
	}
	return r, nil
}

func (o *Options) resolve() (resolved, error) {
	if o == nil {
		return resolve(0, 0, nil)
	}
	r, err := resolve(o.TTL, o.LockTimeout, o.Now)
	r.storeError = o.StoreError
	return r, err
}

func (r resolved) request(principal, key string, fingerprint []byte) ClaimRequest {
	return ClaimRequest{
		Principal: principal, Key: key, Fingerprint: hashFingerprint(fingerprint), LockID: newLockID(),
		Now: r.now(), LockTimeout: r.lockTimeout, TTL: r.ttl,
	}
}

// keeps reports whether err, returned by fn under ctx, is a final result
// to store. An error of a run whose context had ended by then is never
// kept, whatever it matches: it may be a consequence of the cancellation
// (a driver error that does not wrap ctx.Err()), and a result stored for a
// run that could not finish would be replayed as its outcome.
func (r resolved) keeps(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrLockLost) {
		return false
	}
	return r.storeError != nil && r.storeError(err)
}

// Do runs fn at most once per (principal, key) — once to completion; see
// below for failures — and returns its value, or the stored value of the
// run that completed, with replayed true. The value is stored as JSON, so
// T must survive a JSON round trip (exported fields).
//
// fingerprint identifies the request the key was made for (Fingerprint
// helps build one; it is compared by its SHA-256): a later call with the
// same key and another fingerprint gets ErrKeyReused and fn does not run.
// A call while another holds the key gets ErrInProgress; Do does not wait.
//
// When fn fails, its error is returned and the key is released, so a
// retry runs fn again — unless opts.StoreError keeps the error: then it is
// stored, and retries get a *ReplayedError with its text (an error fn
// returns after ctx ended is never kept). When fn panics, the key is
// released and the panic goes on. If the call holds the key longer than
// opts.LockTimeout, another call may take it over and run fn again; the
// late run's result is then refused (ErrLockLost). When the result cannot
// be stored, Do returns fn's value with an error matching ErrNotStored;
// when it is too large for the store, Do returns fn's value and keeps a
// marker, so retries get an error matching ErrResponseTooLarge and fn
// never runs again.
//
// Cancellation: a ctx that has ended before the call claims nothing. Once
// sent, the claim is awaited even if ctx ends meanwhile (bounded by a few
// seconds), so that its release, when ctx ended before fn could start,
// comes after it: a key is never left locked by a call that gave up.
//
// principal scopes the key (a user, tenant or API key; "" is one shared
// namespace): keys of different principals never meet. key must be 1 to
// DefaultMaxKeyLength bytes of printable ASCII.
//
// Errors: concurkit.ErrInvalidArgument (nil store or fn, bad key
// (ErrInvalidKey) or principal, bad opts) before any I/O; ErrInProgress;
// ErrKeyReused; fn's error; *ReplayedError; ErrLockLost; ErrNotStored;
// ErrResponseTooLarge; ctx.Err() when ctx ended before fn started; the
// store's errors (matching ctx.Err() when ctx ended the call).
func Do[T any](ctx context.Context, s Store, principal, key string, fingerprint []byte, opts *Options, fn func(ctx context.Context) (T, error)) (T, bool, error) {
	var zero T
	if handle.IsNil(s) {
		return zero, false, invalid("nil store")
	}
	if fn == nil {
		return zero, false, invalid("nil function")
	}
	o, err := check(principal, key, opts)
	if err != nil {
		return zero, false, err
	}
	req := o.request(principal, key, fingerprint)
	rec, oc, err := claim(ctx, s, req)
	if err != nil {
		return zero, false, err
	}
	if v, done, err := settled[T](oc, rec); done {
		return v, oc == completed, err
	}
	lock := Lock{Principal: principal, Key: key, ID: req.LockID}
	if err := gaveUp(ctx, s, lock); err != nil {
		return zero, false, err
	}
	v, err := runLocked(ctx, s, lock, func() (T, error) { return fn(ctx) })
	if err != nil {
		return zero, false, finishFailed(ctx, s, o, lock, err)
	}
	body, err := json.Marshal(v)
	if err != nil {
		release(ctx, s, lock)
		return zero, false, fmt.Errorf("idempotency: encode result: %w", err)
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	expires := o.now().Add(o.ttl)
	err = s.Complete(cctx, lock, Response{Status: http.StatusOK, Body: body}, expires)
	if errors.Is(err, ErrResponseTooLarge) {
		// fn ran: keep a marker, so that a retry does not run it again.
		err = s.Complete(cctx, lock, notStored(http.StatusOK, int64(len(body)), ""), expires)
	}
	if err != nil {
		if errors.Is(err, ErrLockLost) {
			return zero, false, err
		}
		return v, false, errors.Join(ErrNotStored, err)
	}
	return v, false, nil
}

// gaveUp releases a key just claimed for a caller whose context ended
// while the claim was in flight (claim waits for the answer whatever the
// caller does), and returns the context's error; nil if ctx is live.
func gaveUp(ctx context.Context, s Store, lock Lock) error {
	err := ctx.Err()
	if err != nil {
		release(ctx, s, lock)
	}
	return err
}

// check validates the arguments shared by Do and DoPhases.
func check(principal, key string, opts *Options) (resolved, error) {
	if err := checkKey(key, DefaultMaxKeyLength); err != nil {
		return resolved{}, err
	}
	if err := checkPrincipal(principal); err != nil {
		return resolved{}, err
	}
	return opts.resolve()
}

// settled handles the outcomes in which nothing runs: it returns done
// false for created and resumed.
func settled[T any](oc outcome, rec Record) (T, bool, error) {
	var zero T
	switch oc {
	case created, resumed:
		return zero, false, nil
	case inProgress:
		return zero, true, ErrInProgress
	case mismatch:
		return zero, true, ErrKeyReused
	}
	r := rec.Response
	switch r.Status {
	case http.StatusOK:
	case http.StatusGone: // notStored's marker
		return zero, true, fmt.Errorf("%w: the call completed, but its result was too large to store and cannot be replayed", ErrResponseTooLarge)
	default:
		return zero, true, &ReplayedError{Message: string(r.Body)}
	}
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		return zero, true, fmt.Errorf("idempotency: decode stored result: %w", err)
	}
	return v, true, nil
}

// runLocked runs fn; if fn panics, it releases the key (so that it stays
// retryable) and re-panics.
func runLocked[T any](ctx context.Context, s Store, lock Lock, fn func() (T, error)) (T, error) {
	done := false
	defer func() {
		if !done {
			release(ctx, s, lock)
		}
	}()
	v, err := fn()
	done = true
	return v, err
}

// finishFailed stores err as the result if o keeps it, else releases the
// key; it returns the error for the caller.
func finishFailed(ctx context.Context, s Store, o resolved, lock Lock, err error) error {
	if errors.Is(err, ErrLockLost) {
		return err
	}
	if !o.keeps(ctx, err) {
		release(ctx, s, lock)
		return err
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	resp := Response{Status: http.StatusInternalServerError, Body: []byte(err.Error())}
	if serr := s.Complete(cctx, lock, resp, o.now().Add(o.ttl)); serr != nil && !errors.Is(serr, ErrLockLost) {
		return errors.Join(err, ErrNotStored, serr)
	}
	return err
}

// release unlocks the key, best effort: if it fails the key unlocks at
// LockTimeout anyway.
func release(ctx context.Context, s Store, lock Lock) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	_ = s.Release(cctx, lock)
}
