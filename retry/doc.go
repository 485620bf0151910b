// Package retry runs an operation again when it fails with an error that is
// worth retrying: a version conflict, a deadlock, a serialization failure.
//
// The schedule is exponential backoff with full jitter and a cap (the AWS
// Architecture Blog's "full jitter": sleep a uniformly random duration in
// [0, min(MaxDelay, BaseDelay·2ⁿ)]), bounded by a number of attempts and an
// optional elapsed-time budget. Errors that are not retryable are returned
// at once; a cancelled context stops the loop between attempts and is joined
// with the last error so that both match errors.Is.
//
// The zero Policy is valid and uses the documented defaults. The package is
// shared by optimistic, pessimistic and distlock.
package retry
