package saga

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
)

// ErrCompensated matches the *FailedError of a saga that a step's action
// failed and whose completed steps were all compensated: the saga is over
// (status Compensated), and running it again returns the same error
// without calling anything. Its observe.ErrorType is "compensated".
var ErrCompensated error = &sentinel{msg: "saga: step failed, saga compensated", typ: "compensated"}

// ErrCompensationFailed matches the *FailedError of a saga whose
// compensation did not finish: a compensation kept failing after its
// retries (or the context ended during one). The saga stays in status
// Compensating with its lease released; the next Run resumes the
// compensation where it stopped (a compensated step is never compensated
// again, a pending one is never skipped). Its observe.ErrorType is
// "compensation_failed".
var ErrCompensationFailed error = &sentinel{msg: "saga: compensation incomplete", typ: "compensation_failed"}

// ErrInProgress is returned by Run when another runner holds the
// instance's lease: it is running the saga now (or crashed less than
// Config.LeaseTTL ago). Nothing was run; try again later. Its
// observe.ErrorType is "in_progress".
var ErrInProgress error = &sentinel{msg: "saga: instance is being run by another runner", typ: "in_progress"}

// ErrLeaseLost is returned when the runner's lease on the instance passed
// to another runner while it worked (its lease expired, for example
// because the process was paused longer than Config.LeaseTTL): its record
// was refused and it stopped; the new holder continues the saga. A Store's
// Save and Extend return it when the claim is no longer the instance's.
// Its observe.ErrorType is "lease_lost".
var ErrLeaseLost error = &sentinel{msg: "saga: lease lost to another runner", typ: "lease_lost"}

// ErrDefinitionMismatch is returned by Run when the stored instance was
// started by another definition: another name, another version, or other
// step names. A saga is resumed only by the definition that started it;
// deploy a changed definition under a new version and let the old one
// finish its instances. Its observe.ErrorType is "definition_mismatch".
var ErrDefinitionMismatch error = &sentinel{msg: "saga: instance was started by another definition", typ: "definition_mismatch"}

// ErrInputMismatch is returned by Run when the key was used before with
// another input: a key names one saga instance, and its stored input is
// the one every retry must present. Nothing is run. Its observe.ErrorType
// is "input_mismatch".
var ErrInputMismatch error = &sentinel{msg: "saga: key reused with a different input", typ: "input_mismatch"}

// ErrNotFound is returned by the adapters' Load when no instance has the
// key. It also matches sql.ErrNoRows. Its observe.ErrorType is
// "not_found".
var ErrNotFound error = &notFound{sentinel{msg: "saga: instance not found", typ: "not_found"}}

// sentinel is a saga error with a stable, low-cardinality ErrorType for
// metrics (observe.ErrorType).
type sentinel struct{ msg, typ string }

func (e *sentinel) Error() string     { return e.msg }
func (e *sentinel) ErrorType() string { return e.typ }

type notFound struct{ sentinel }

// Is makes errors.Is(ErrNotFound, sql.ErrNoRows) true (and pgx.ErrNoRows,
// which wraps it).
func (e *notFound) Is(target error) bool { return errors.Is(target, sql.ErrNoRows) }

// FailedError reports a saga that a step's action failed: the step, the
// action's error and how far compensation got. It matches ErrCompensated
// when every completed step was compensated (the saga is over), and
// ErrCompensationFailed when a compensation did not finish (a later Run
// resumes it). errors.Is and errors.As see both the action's error and the
// compensation's.
//
// When Run returns the outcome of an earlier run (the instance was already
// compensated), Err holds the stored message of the original error: its
// type did not survive the database.
type FailedError struct {
	Key  string // the saga instance
	Step string // the step whose action failed
	Err  error  // the action's error
	// CompensationStep is the step whose compensation failed, or "" when
	// compensation finished.
	CompensationStep string
	// CompensationErr is that compensation's error, or nil.
	CompensationErr error
}

// Error names the instance, the failed step, its error and, if any, the
// failed compensation.
func (e *FailedError) Error() string {
	s := fmt.Sprintf("saga: %s: step %q failed: %v", e.Key, e.Step, e.Err)
	if e.CompensationErr != nil {
		return s + fmt.Sprintf("; compensation of step %q failed (run the saga again to resume it): %v", e.CompensationStep, e.CompensationErr)
	}
	return s + "; completed steps compensated"
}

// Is matches ErrCompensated or ErrCompensationFailed, by how far
// compensation got.
func (e *FailedError) Is(target error) bool {
	switch target {
	case ErrCompensated:
		return e.CompensationErr == nil
	case ErrCompensationFailed:
		return e.CompensationErr != nil
	}
	return false
}

// Unwrap returns the action's error and the compensation's error, if any.
func (e *FailedError) Unwrap() []error {
	if e.CompensationErr == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.CompensationErr}
}

// ErrorType returns "compensated" or "compensation_failed" (see
// observe.ErrorType).
func (e *FailedError) ErrorType() string {
	if e.CompensationErr != nil {
		return "compensation_failed"
	}
	return "compensated"
}

// Retryable wraps err so that Run retries the step (under Config.Retry)
// instead of failing it at once: for an action's transient failures (a
// timeout, a 503) that are not already retryable by retry.IsRetryable.
// Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return retryableError{err}
}

type retryableError struct{ err error }

func (e retryableError) Error() string   { return e.err.Error() }
func (e retryableError) Unwrap() error   { return e.err }
func (e retryableError) Retryable() bool { return true }

// invalid returns an error matching concurkit.ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: saga: %s", concurkit.ErrInvalidArgument, fmt.Sprintf(format, args...))
}
