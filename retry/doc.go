// Package retry runs an operation again when it fails with an error that is
// worth retrying: a version conflict, a deadlock, a serialization failure.
//
// The schedule is exponential backoff with full jitter and a cap (the AWS
// Architecture Blog's "full jitter": sleep a uniformly random duration in
// [0, min(MaxDelay, BaseDelay·2ⁿ)]), bounded by time (the default: 5 s
// from the first attempt), by a number of attempts, or both. The default is
// a time because on a hot row every conflict means another writer
// committed: a count of attempts gives up on callers that are merely
// unlucky (10 attempts gave up several times a second with 8 writers on
// one row), whereas a time matches what a caller can afford. Errors that are not retryable are returned
// at once; a cancelled context stops the loop between attempts and is joined
// with the last error so that both match errors.Is. When the budget runs
// out, *ExhaustedError says how many attempts were made and whether the
// time budget (MaxElapsed) or the attempt limit ended them.
//
// Retries are observed through hooks on the context (observe.WithHooks):
// Hooks.Retry receives each retried failure with its delay, and a last
// event with GaveUp set when the budget is used up. Without hooks the loop
// allocates nothing per attempt.
//
// The zero Policy is valid and uses the documented defaults; a negative
// field, or a nil function, is an error matching concurkit.ErrInvalidArgument.
// The package imports only the standard library (and concurkit's own
// stdlib-only packages). It is shared by optimistic, the pessimistic
// transaction helpers and distlock.
package retry
