package distlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
)

// Do holds the lock on key while fn runs: it acquires it with
// locker.Acquire(ctx, key, opts) (blocking), runs fn, and always releases
// the lease, also when fn panics (the panic goes on after the release).
//
// fn gets a context that ends when ctx ends or when the lease ends,
// whichever comes first; context.Cause tells which: ctx's cause, or the
// lease's (an error matching ErrLeaseLost when the lease was lost or
// expired). Pass it to everything fn does, and write with the lease's
// token through package fenced: the context stops work early, only the
// token protects storage from a holder that was paused past its lease. To
// give the lock up before fn returns, call lease.Release with a context
// other than fn's: fn's context ends as soon as the lease does, which is
// the first thing Release does.
//
// Do returns the error of Acquire if it could not acquire (fn did not
// run). If fn returned an error, Do returns it, joined with the lease's
// loss cause (matching ErrLeaseLost) if the lease was lost or expired
// before fn returned, and with the error of Release, if any (an
// unconfirmed release matches concurkit.ErrOutcomeUnknown). If fn
// returned nil — its work is done — Do returns nil, or a *CompletedError
// when the lease was lost while fn ran or the release could not be
// confirmed: a job loop that retries on error must not run fn's work
// again for that (see CompletedError). Release gets ctx: it cleans up even
// when ctx was cancelled, but returns by ctx's deadline (see
// Lease.Release).
//
// A nil locker or fn is bad input: an error matching
// concurkit.ErrInvalidArgument, before any I/O.
func Do(ctx context.Context, locker Locker, key string, opts *Options, fn func(ctx context.Context, lease Lease) error) error {
	if fn == nil {
		return fmt.Errorf("%w: distlock: nil fn", concurkit.ErrInvalidArgument)
	}
	_, err := DoValue(ctx, locker, key, opts, func(ctx context.Context, lease Lease) (struct{}, error) {
		return struct{}{}, fn(ctx, lease)
	})
	return err
}

// CompletedError is the error of Do and DoValue when fn returned nil —
// its work is done: do not run it again as if it had failed — but what
// followed was not clean. Err says what: the lease was lost or expired
// while fn ran (matching ErrLeaseLost: fn's work may not have been
// exclusive, and only fenced writes were safe from a successor), or the
// release could not be confirmed (matching concurkit.ErrOutcomeUnknown:
// the lock may stay held until its TTL), or both. errors.Is sees through
// it to Err; tell it from a failure with errors.As:
//
//	var done *distlock.CompletedError
//	if err != nil && !errors.As(err, &done) {
//		// fn failed, or never ran: retry
//	}
type CompletedError struct {
	Err error
}

func (e *CompletedError) Error() string {
	return "distlock: fn completed, then: " + e.Err.Error()
}

// Unwrap returns Err.
func (e *CompletedError) Unwrap() error { return e.Err }

// DoValue is Do for a fn that returns a value. It returns fn's value
// whenever fn ran, even together with an error (the loss of the lease, a
// failed release: the work was done, but may not have been exclusive, or
// the lock may still be held until its TTL), and the zero value when the
// lock could not be acquired.
func DoValue[T any](ctx context.Context, locker Locker, key string, opts *Options, fn func(ctx context.Context, lease Lease) (T, error)) (v T, err error) {
	switch {
	case handle.IsNil(locker):
		return v, fmt.Errorf("%w: distlock: nil locker", concurkit.ErrInvalidArgument)
	case fn == nil:
		return v, fmt.Errorf("%w: distlock: nil fn", concurkit.ErrInvalidArgument)
	}
	lease, err := locker.Acquire(ctx, key, opts)
	if err != nil {
		return v, err
	}
	if lease == nil {
		return v, fmt.Errorf("distlock: %T.Acquire returned neither a lease nor an error", locker)
	}
	lctx := lease.Context()
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(lctx, func() { cancel(context.Cause(lctx)) })

	// finish runs after fn returned or panicked: the lease is always
	// released. ferr is fn's error.
	finish := func(ferr error) error {
		stop()
		cancel(nil)
		// Valid reads the clock: a lease whose deadline passed while fn
		// ran counts as lost even if its expiry timer has not fired yet.
		var lost error
		if !lease.Valid() {
			if c := context.Cause(lctx); c != nil && !errors.Is(c, ErrReleased) {
				lost = c
			}
		}
		rerr := lease.Release(ctx)
		if lost != nil && (errors.Is(ferr, lost) || errors.Is(rerr, lost)) {
			lost = nil // reported already (fn returned context.Cause, or Release did)
		}
		if ferr == nil && (lost != nil || rerr != nil) {
			return &CompletedError{Err: errors.Join(lost, rerr)}
		}
		return errors.Join(ferr, lost, rerr)
	}
	// Without recover: a panic (or runtime.Goexit) in fn unwinds with its
	// own stack after the release.
	returned := false
	defer func() {
		if !returned {
			_ = finish(nil)
		}
	}()
	v, err = fn(fctx, doLease{lease, fctx})
	returned = true
	return v, finish(err)
}

// doLease is the lease fn gets: its Release returns only once fn's context
// has ended too (the lease's end reaches fn's context through
// context.AfterFunc, on another goroutine), so that fn sees its context
// ended right after the Release call that ended the lease.
type doLease struct {
	Lease
	fctx context.Context
}

func (l doLease) Release(ctx context.Context) error {
	err := l.Lease.Release(ctx)
	if l.Lease.Context().Err() != nil {
		// The AfterFunc fires, or Do's finish cancels fctx: either way
		// at once.
		<-l.fctx.Done()
	}
	return err
}
