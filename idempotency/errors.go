package idempotency

import (
	"fmt"

	"github.com/concurkit/concurkit"
)

// sentinel is an error callers branch on with errors.Is; typ is its
// observe.ErrorType name.
type sentinel struct{ msg, typ string }

func (e *sentinel) Error() string { return e.msg }

// ErrorType returns the error's stable low-cardinality name, for
// observe.ErrorType and metric attributes.
func (e *sentinel) ErrorType() string { return e.typ }

// Sentinel errors, checked with errors.Is.
var (
	// ErrInvalidKey: an idempotency key that is empty, longer than the
	// limit (DefaultMaxKeyLength), or has a byte outside printable ASCII,
	// or an Idempotency-Key field value that is not an sf-string or a bare
	// token (see ParseKey). It matches concurkit.ErrInvalidArgument.
	// The middleware answers it with 400.
	ErrInvalidKey = concurkit.InvalidArgumentError("idempotency: invalid key")

	// ErrInProgress: another call holds the key (claimed it less than
	// LockTimeout ago and has not finished). Nothing ran; try again later.
	// The middleware answers it with 409. ErrorType "in_progress".
	ErrInProgress error = &sentinel{"idempotency: request in progress", "in_progress"}

	// ErrKeyReused: the key was first used with another request (its
	// fingerprint differs). Nothing ran. The middleware answers it with
	// 422. ErrorType "key_reused".
	ErrKeyReused error = &sentinel{"idempotency: key reused with a different request", "key_reused"}

	// ErrLockLost: the call's hold on the key ended before it could record
	// its result or recovery point: it held the key longer than
	// LockTimeout and a retry took it over, or the key expired and was
	// reaped or reused. The store refused the write (the lock is fenced by
	// a per-claim lock id), so the taking-over call's result stands; in a
	// phase, the phase's own writes were rolled back with it. ErrorType
	// "lock_lost".
	ErrLockLost error = &sentinel{"idempotency: lock on the key lost", "lock_lost"}

	// ErrNotStored: fn (or the handler) ran but its result could not be
	// stored. Do returns it joined with the store's error, together with
	// fn's value. The key stays locked until LockTimeout, after which a
	// retry runs fn again: use DoPhases, whose last phase stores the result
	// in the transaction of its writes, where that is not acceptable.
	// ErrorType "not_stored".
	ErrNotStored error = &sentinel{"idempotency: result not stored", "not_stored"}

	// ErrResponseTooLarge: a response (or Do's result) is larger than the
	// store can keep — DynamoDB's 400 KB item, MariaDB/MySQL's
	// max_allowed_packet — or, in the middleware, than
	// Config.MaxResponseBytes. The operation ran to completion: instead
	// of its result the key keeps a small marker, so that a retry never
	// runs it again. A retry through the middleware gets 410 Gone, a
	// problem+json document of type ResponseNotStoredType; a retry of Do
	// gets an error matching ErrResponseTooLarge (and replayed true).
	// Stores return it from Complete. ErrorType "response_too_large".
	ErrResponseTooLarge error = &sentinel{"idempotency: response too large to store", "response_too_large"}
)

// ReplayedError is the error Do returns on a replay of a call whose fn
// failed with an error that Options.StoreError chose to keep: the
// original error's text (its type and wrapped errors are not stored).
type ReplayedError struct {
	Message string // the original error's Error()
}

// Error returns the original error's message, prefixed.
func (e *ReplayedError) Error() string { return "idempotency: replayed error: " + e.Message }

// ErrorType returns "replayed_error" (see observe.ErrorType).
func (e *ReplayedError) ErrorType() string { return "replayed_error" }

// invalid returns an error matching concurkit.ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: idempotency: %s", concurkit.ErrInvalidArgument, fmt.Sprintf(format, args...))
}
