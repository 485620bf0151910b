package multilock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
)

// Acquire locks every key of keys on l, taking one lease per key with
// l.Acquire (blocking) in canonical order: sorted byte-wise, duplicates
// removed (see the package doc for why this prevents deadlock). ctx bounds
// the whole acquisition; opts (nil means the defaults) applies to every
// lease.
//
// On failure nothing is held: the keys already taken are released, in
// reverse order, with a context that ignores ctx's cancellation and is
// bounded by distlock.DefaultCleanupTimeout. The error names the key that
// failed and wraps the backend's error (so it matches what that matches);
// it also matches ctx.Err() when ctx ended (with distlock.ErrNotAcquired
// when the backend says so, as concurkit's do), matches both
// distlock.ErrNotAcquired and distlock.ErrLeaseLost when a lease already
// taken ended before the set was complete, and joins the error of every
// release of the rollback that failed (concurkit.ErrOutcomeUnknown when
// unconfirmed).
//
// Bad input is an error matching concurkit.ErrInvalidArgument, returned
// before any call to l: a nil or typed-nil l, no keys, a negative
// opts.TTL, and an empty key (which matches distlock.ErrInvalidKey too,
// as the backends' errors for it do).
func Acquire(ctx context.Context, l distlock.Locker, keys []string, opts *distlock.Options) (*Set, error) {
	return acquire(ctx, l, keys, opts, true)
}

// TryAcquire is Acquire without waiting: each key gets one
// l.TryAcquire attempt, in canonical order, and the first key held by
// someone else ends the call with an error matching
// distlock.ErrNotAcquired (not a context error: it did not wait), after
// the keys already taken were released. Rollback, errors and bad input
// are as for Acquire.
func TryAcquire(ctx context.Context, l distlock.Locker, keys []string, opts *distlock.Options) (*Set, error) {
	return acquire(ctx, l, keys, opts, false)
}

// Set is a held set of keys: one lease per key, acquired by Acquire or
// TryAcquire (a zero Set holds nothing and is not to be used). Its
// methods are safe for concurrent use. Release it when done, also when a
// lease of it was lost (a lost lease stays registered with its Locker
// until released).
type Set struct {
	keys   []string         // canonical: sorted, no duplicates
	leases []distlock.Lease // leases[i] holds keys[i]
	ctx    context.Context
	end    context.CancelCauseFunc
	stops  []func() bool // deregister the watches of the leases' contexts
}

// canonical validates the input of Acquire and TryAcquire and returns the
// keys in lock order: sorted, without duplicates, in a new slice.
func canonical(l distlock.Locker, keys []string, opts *distlock.Options) ([]string, error) {
	switch {
	case handle.IsNil(l):
		return nil, fmt.Errorf("%w: multilock: nil locker", concurkit.ErrInvalidArgument)
	case len(keys) == 0:
		return nil, fmt.Errorf("%w: multilock: no keys", concurkit.ErrInvalidArgument)
	case opts != nil && opts.TTL < 0:
		return nil, fmt.Errorf("%w: multilock: TTL %v < 0", concurkit.ErrInvalidArgument, opts.TTL)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	if sorted[0] == "" {
		return nil, fmt.Errorf("%w: multilock: empty key", distlock.ErrInvalidKey)
	}
	return slices.Compact(sorted), nil
}

func acquire(ctx context.Context, l distlock.Locker, keys []string, opts *distlock.Options, wait bool) (*Set, error) {
	sorted, err := canonical(l, keys, opts)
	if err != nil {
		return nil, err
	}
	s := &Set{keys: sorted, leases: make([]distlock.Lease, 0, len(sorted))}
	s.ctx, s.end = context.WithCancelCause(context.Background())
	// The wait for a later key ends when ctx does or when a lease already
	// taken ends: its key is no longer ours, and taking it again would
	// break the canonical order.
	actx, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	unwatch := context.AfterFunc(s.ctx, func() { stopWait(context.Cause(s.ctx)) })
	defer unwatch()

	for i, key := range sorted {
		var lease distlock.Lease
		if wait {
			lease, err = l.Acquire(actx, key, opts)
		} else {
			lease, err = l.TryAcquire(actx, key, opts)
		}
		if err == nil && handle.IsNil(lease) {
			err = fmt.Errorf("multilock: %T returned neither a lease nor an error", l)
		}
		if err != nil {
			if !handle.IsNil(lease) { // a Locker must not return both; do not leak it
				s.add(key, lease)
			}
			unwatch()
			return nil, s.rollback(ctx, s.failure(ctx, key, i, err))
		}
		s.add(key, lease)
	}
	// A lease whose deadline passed while a later key was acquired may not
	// have seen its timer fire yet: Valid reads the clock.
	if !s.Valid() {
		unwatch()
		return nil, s.rollback(ctx, s.failure(ctx, "", len(sorted), nil))
	}
	return s, nil
}

// add appends the lease of key and makes the set's context end with that
// lease's.
func (s *Set) add(key string, lease distlock.Lease) {
	s.leases = append(s.leases, lease)
	lctx := lease.Context()
	s.stops = append(s.stops, context.AfterFunc(lctx, func() { s.end(leaseCause(key, lctx)) }))
}

// leaseCause is the cause the set's context ends with when the lease of
// key ended: the lease's own, naming the key. A Release of the set ends
// the set's context first, with distlock.ErrReleased, so this is a loss.
func leaseCause(key string, lctx context.Context) error {
	cause := context.Cause(lctx)
	if cause == nil || (errors.Is(cause, context.Canceled) && !errors.Is(cause, distlock.ErrReleased)) {
		// A Locker that does not say why: it ended without our Release.
		cause = errors.Join(distlock.ErrLeaseLost, cause)
	}
	return fmt.Errorf("multilock: lease of %q ended: %w", key, cause)
}

// failure builds the error of an acquisition that failed at key (the
// i-th of the canonical keys) with err, or, with err nil, after every key
// was taken but a lease had already ended.
func (s *Set) failure(ctx context.Context, key string, i int, err error) error {
	lost := context.Cause(s.ctx) // non-nil: a lease taken earlier ended
	if err == nil {
		return errors.Join(fmt.Errorf("multilock: a lease ended before the set was complete: %w", distlock.ErrNotAcquired), lost)
	}
	err = fmt.Errorf("multilock: acquire %q (key %d of %d): %w", key, i+1, len(s.keys), err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		// The caller's context ended: the error says so, whatever the
		// backend wrapped.
		err = errors.Join(err, cerr)
	}
	if lost != nil {
		if ctx.Err() == nil && errors.Is(err, context.Canceled) {
			// Our own wait context ended because a lease was lost: its
			// context.Canceled is not the caller's doing and must not
			// read as if it were.
			err = fmt.Errorf("multilock: wait for %q (key %d of %d) given up: %w", key, i+1, len(s.keys), distlock.ErrNotAcquired)
		}
		err = errors.Join(err, lost)
	}
	return err
}

// rollback releases the leases taken, in reverse order, with a context
// that ignores ctx's cancellation and ends after
// distlock.DefaultCleanupTimeout, and returns cause joined with every
// release that failed. A release that reports the lease lost (and nothing
// unconfirmed) is not a failure: that key is not held.
func (s *Set) rollback(ctx context.Context, cause error) error {
	s.stopWatching(cause)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), distlock.DefaultCleanupTimeout)
	defer cancel()
	errs := []error{cause}
	for i := len(s.leases) - 1; i >= 0; i-- {
		err := s.leases[i].Release(rctx)
		if err != nil && (!errors.Is(err, distlock.ErrLeaseLost) || errors.Is(err, concurkit.ErrOutcomeUnknown)) {
			errs = append(errs, fmt.Errorf("multilock: rollback: release %q: %w", s.keys[i], err))
		}
	}
	return errors.Join(errs...)
}

// stopWatching ends the set's context with cause, unless it ended
// already, and deregisters the watches of the leases' contexts.
func (s *Set) stopWatching(cause error) {
	s.end(cause)
	for _, stop := range s.stops {
		stop()
	}
}

// Keys returns the keys of the set in canonical order (sorted, without
// duplicates), in a new slice.
func (s *Set) Keys() []string { return slices.Clone(s.keys) }

// index returns the position of key in s.keys, or -1.
func (s *Set) index(key string) int {
	if i, ok := slices.BinarySearch(s.keys, key); ok {
		return i
	}
	return -1
}

// Lease returns the lease of key, or nil if key is not in the set.
func (s *Set) Lease(key string) distlock.Lease {
	if i := s.index(key); i >= 0 {
		return s.leases[i]
	}
	return nil
}

// Token returns the fencing token of key, or 0 (not a valid token) if key
// is not in the set. Fence every write with the token of the key it
// touches: tokens of different keys are unrelated.
func (s *Set) Token(key string) fenced.Token {
	if i := s.index(key); i >= 0 {
		return s.leases[i].Token()
	}
	return 0
}

// Context returns a context that ends when the first lease of the set
// ends: lost or expired (context.Cause then matches distlock.ErrLeaseLost,
// or whatever that lease's cause matches, and names its key), or released
// (Release ends it first, with distlock.ErrReleased). Do the set's work
// under it; it stops work early, fenced writes protect storage.
func (s *Set) Context() context.Context { return s.ctx }

// Deadline returns the earliest Deadline of the set's leases: the end of
// the set's safe validity. ok is false when no lease has a time-based
// validity (see distlock.Lease.Deadline).
func (s *Set) Deadline() (deadline time.Time, ok bool) {
	for _, l := range s.leases {
		if d, has := l.Deadline(); has && (!ok || d.Before(deadline)) {
			deadline, ok = d, true
		}
	}
	return deadline, ok
}

// Valid reports whether every lease of the set is still valid (see
// distlock.Lease.Valid: it reads the clock at call time). When it returns
// false, Context is done, with the cause of a lease that ended.
func (s *Set) Valid() bool {
	for i, l := range s.leases {
		if !l.Valid() {
			// Do not wait for the watch of the lease's context, which
			// runs on another goroutine.
			s.end(leaseCause(s.keys[i], l.Context()))
			return false
		}
	}
	return true
}

// Extend extends every lease of the set by ttl from now (0: the TTL given
// at acquisition), one after the other, and returns the errors of those
// that failed joined (errors.Join), each naming its key: distlock.ErrLeaseLost
// for a lease lost, expired or released, the backend's error otherwise. A
// negative ttl is an error matching concurkit.ErrInvalidArgument, before
// any call. Every lease is attempted even if one fails.
func (s *Set) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: multilock: TTL %v < 0", concurkit.ErrInvalidArgument, ttl)
	}
	var errs []error
	for i, l := range s.leases {
		if err := l.Extend(ctx, ttl); err != nil {
			errs = append(errs, fmt.Errorf("multilock: extend %q: %w", s.keys[i], err))
		}
	}
	return errors.Join(errs...)
}

// Release releases every lease of the set, in reverse canonical order,
// each with ctx (see distlock.Lease.Release: the cleanup ignores ctx's
// cancellation but Release returns by ctx's deadline). It first ends
// Context, with distlock.ErrReleased. Every lease is released even if one
// fails; the errors are joined (errors.Join), each naming its key:
// distlock.ErrLeaseLost for a lease that was lost or expired, an error
// matching concurkit.ErrOutcomeUnknown (and ctx.Err() when ctx ended) for
// a release the server did not confirm. Releasing twice returns nil.
func (s *Set) Release(ctx context.Context) error {
	s.stopWatching(distlock.ErrReleased)
	var errs []error
	for i := len(s.leases) - 1; i >= 0; i-- {
		if err := s.leases[i].Release(ctx); err != nil {
			errs = append(errs, fmt.Errorf("multilock: release %q: %w", s.keys[i], err))
		}
	}
	return errors.Join(errs...)
}
