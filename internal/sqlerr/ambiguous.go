package sqlerr

// AmbiguousCommitError reports that a write was sent to the server but its
// outcome is unknown: the connection failed, or the caller's context ended
// and the statement could not be confirmed stopped, before the server's
// answer arrived. The write may or may not have committed; the caller must
// check the data (or make the work idempotent) before trying again, and
// retry loops must not retry it blindly.
//
// It is the module's one way to say "outcome unknown": the public packages
// re-export it as a type alias (optimistic.AmbiguousCommitError,
// fenced.AmbiguousCommitError, upsert.AmbiguousCommitError), so a single
// errors.As target matches it whichever package returned it. Err keeps the
// cause, context.Canceled or context.DeadlineExceeded included, so
// errors.Is(err, context.Canceled) still holds.
type AmbiguousCommitError struct {
	Err error // why the outcome is unknown
}

// Error says the outcome is unknown and why.
func (e *AmbiguousCommitError) Error() string {
	if e.Err == nil {
		return "commit outcome unknown"
	}
	return "commit outcome unknown: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *AmbiguousCommitError) Unwrap() error { return e.Err }
