package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/concurkit/concurkit/internal/handle"
)

// Phase is one step of a multi-step operation run by DoPhases (Brandur
// Leach's "atomic phases"): Run's writes, made through tx, commit in one
// transaction together with the key's new recovery point, Name. A retry
// of the operation skips the phases whose transaction committed.
//
// A phase that calls an outside service (a payment API) cannot roll that
// call back with tx: pass the service Step.DerivedKey() as its own
// idempotency key, so that the call, repeated by a retry of the phase,
// has its effect once. Record what the call returned through tx, in the
// same phase, for later phases to read.
type Phase[Tx any] struct {
	// Name is the recovery point the phase reaches: unique in the
	// operation, 1 to MaxPointLength bytes, without ':' (so that derived
	// keys never collide, see Step.DerivedKey), neither Started nor
	// Finished.
	// Renaming or reordering phases changes where stored keys resume: a
	// key at a recovery point the operation no longer has fails.
	Name string
	Run  func(ctx context.Context, tx Tx, st Step) error
}

// Step tells a phase (or finish) which operation and run it belongs to.
type Step struct {
	Principal string
	Key       string
	// Phase is the phase's Name (Finished for finish).
	Phase string
	// Attempt is the run number of the key: 1 on the first run, higher
	// when a retry resumed it.
	Attempt int64
}

// DerivedKey returns "<key>:<phase>", the idempotency key for the calls
// the phase makes to outside services. Keys may contain ':' but phase
// names may not (DoPhases refuses them), so the phase is what follows the
// last ':' and no two (key, phase) pairs share a derived key: ("order",
// "1:charge") would otherwise be ("order:1", "charge"). It is unique per
// principal only:
// if the service's keys are shared by all your principals (one account at
// a payment provider for all tenants), prefix it with the principal.
func (s Step) DerivedKey() string { return s.Key + ":" + s.Phase }

// DoPhases is Do for a multi-step operation on a store that keeps its keys
// in the database of the operation's writes (idempotencypg.Store,
// idempotencymysql.Store): the phases run in order, each in its own
// transaction that also moves the key's recovery point to the phase's
// Name, then finish runs in a last transaction that also stores its value
// (as JSON) as the result and completes the key. A failure (an error, a
// panic, a crash) loses only the phase in flight: a retry with the same
// key resumes after the last phase that committed, and never repeats an
// earlier one. Each phase's transaction also refreshes the key's lock, so
// opts.LockTimeout bounds one phase, not the whole operation.
//
// Everything else is Do's: replays of the stored value (replayed true),
// ErrInProgress, ErrKeyReused, opts.StoreError (a kept error completes the
// key — the committed phases' writes stay), ErrLockLost for a run whose
// lock was taken over (its phase in flight rolled back), release on error
// and panic, cancellation. A value too large for the store is kept as a
// marker: finish runs again in a new transaction that commits its writes
// with the marker, and retries get ErrResponseTooLarge. The store may run a phase's function again in a fresh
// transaction after a deadlock or serialization failure.
//
// Errors also include concurkit.ErrInvalidArgument for no finish, an
// invalid (empty, too long, with ':', reserved) or duplicate phase name, and an error (the key released) when
// the key's recovery point is not one of the phases.
func DoPhases[Tx, T any](ctx context.Context, s TxStore[Tx], principal, key string, fingerprint []byte, opts *Options, phases []Phase[Tx], finish func(ctx context.Context, tx Tx, st Step) (T, error)) (T, bool, error) {
	var zero T
	if handle.IsNil(s) {
		return zero, false, invalid("nil store")
	}
	if finish == nil {
		return zero, false, invalid("nil finish function")
	}
	index := make(map[string]int, len(phases))
	for i, p := range phases {
		switch {
		case p.Name == "" || len(p.Name) > MaxPointLength:
			return zero, false, invalid("phase %d: name must be 1 to %d bytes", i, MaxPointLength)
		case strings.IndexByte(p.Name, ':') >= 0:
			return zero, false, invalid("phase %d: name %q contains ':', which would make derived keys ambiguous", i, p.Name)
		case p.Name == Started || p.Name == Finished:
			return zero, false, invalid("phase %d: %q is a reserved recovery point", i, p.Name)
		case p.Run == nil:
			return zero, false, invalid("phase %q: nil Run", p.Name)
		}
		if _, dup := index[p.Name]; dup {
			return zero, false, invalid("phase %q appears twice", p.Name)
		}
		index[p.Name] = i
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
	start := 0
	if rec.RecoveryPoint != Started {
		i, ok := index[rec.RecoveryPoint]
		if !ok {
			release(ctx, s, lock)
			return zero, false, fmt.Errorf("idempotency: key %q is at recovery point %q, which is not a phase of this operation", key, rec.RecoveryPoint)
		}
		start = i + 1
	}
	v, err := runLocked(ctx, s, lock, func() (T, error) {
		step := Step{Principal: principal, Key: key, Attempt: rec.Attempts}
		for _, p := range phases[start:] {
			step.Phase = p.Name
			err := s.Advance(ctx, lock, p.Name, o.now(), o.now().Add(o.ttl), func(ctx context.Context, tx Tx) (*Response, error) {
				return nil, p.Run(ctx, tx, step)
			})
			if err != nil {
				return zero, finishFailed(ctx, s, o, lock, err)
			}
		}
		step.Phase = Finished
		var out T
		marker := false
		last := func(ctx context.Context, tx Tx) (*Response, error) {
			v, err := finish(ctx, tx, step)
			if err != nil {
				return nil, err
			}
			body, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("idempotency: encode result: %w", err)
			}
			out = v
			if marker {
				r := notStored(http.StatusOK, int64(len(body)), "")
				return &r, nil
			}
			return &Response{Status: http.StatusOK, Body: body}, nil
		}
		err := s.Advance(ctx, lock, Finished, o.now(), o.now().Add(o.ttl), last)
		if errors.Is(err, ErrResponseTooLarge) {
			// The transaction rolled back with the result; finish again,
			// keeping a marker with its writes, so that a retry does not
			// run it again.
			marker = true
			err = s.Advance(ctx, lock, Finished, o.now(), o.now().Add(o.ttl), last)
		}
		if err != nil {
			return zero, finishFailed(ctx, s, o, lock, err)
		}
		return out, nil
	})
	return v, false, err
}
