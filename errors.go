package concurkit

// ErrInvalidArgument is the one sentinel for bad input across the module: a
// nil or typed-nil handle, an empty or invalid name, a negative duration, a
// token or version out of range. Every package returns errors that match it
// with errors.Is, before any I/O. A package may define a more specific
// sentinel (distlock.ErrInvalidKey, fenced.ErrInvalidToken) that matches it
// as well.
var ErrInvalidArgument error = &sentinel{"concurkit: invalid argument", "invalid_argument"}

// ErrOutcomeUnknown is the one sentinel for "the request may or may not have
// taken effect": a COMMIT whose answer was lost, a statement the context
// interrupted whose server-side cancellation could not be confirmed, a lock
// release the server did not confirm. The caller must check the data (or
// make the work idempotent) before trying again; nothing in the module
// retries it.
var ErrOutcomeUnknown error = &sentinel{"concurkit: outcome unknown", "outcome_unknown"}

// sentinel is an error with a stable, low-cardinality name for metrics
// (observe.ErrorType).
type sentinel struct{ msg, typ string }

func (e *sentinel) Error() string { return e.msg }

// ErrorType returns the sentinel's metric name, e.g. "invalid_argument".
func (e *sentinel) ErrorType() string { return e.typ }

// InvalidArgumentError returns a new sentinel for a package's more specific
// kind of bad input: its message is msg and it matches both itself and
// ErrInvalidArgument with errors.Is. Packages use it to define their own
// sentinels, e.g.
//
//	var ErrInvalidKey = concurkit.InvalidArgumentError("distlock: invalid key")
func InvalidArgumentError(msg string) error { return &invalidArgument{msg} }

type invalidArgument struct{ msg string }

func (e *invalidArgument) Error() string { return e.msg }

func (e *invalidArgument) Is(target error) bool { return target == ErrInvalidArgument }

// ErrorType returns "invalid_argument" (see observe.ErrorType).
func (e *invalidArgument) ErrorType() string { return "invalid_argument" }

// AmbiguousCommitError reports that a write was sent to the server but its
// outcome is unknown: the connection failed, or the caller's context ended
// and the statement could not be confirmed stopped, before the server's
// answer arrived. The write may or may not have committed; the caller must
// check the data (or make the work idempotent) before trying again, and
// retry loops never retry it.
//
// It matches ErrOutcomeUnknown with errors.Is, and unwraps to its cause, so
// errors.Is(err, context.Canceled) still holds when the caller's context
// ended the call. Every package returns this one type.
type AmbiguousCommitError struct {
	Err error // why the outcome is unknown
}

// Error says the outcome is unknown and why.
func (e *AmbiguousCommitError) Error() string {
	if e.Err == nil {
		return "concurkit: commit outcome unknown"
	}
	return "concurkit: commit outcome unknown: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *AmbiguousCommitError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *AmbiguousCommitError) Is(target error) bool { return target == ErrOutcomeUnknown }

// ErrorType returns "outcome_unknown" (see observe.ErrorType).
func (e *AmbiguousCommitError) ErrorType() string { return "outcome_unknown" }
