package deadlock

import "errors"

var (
	// ErrInvalidMode is returned for a lock mode other than Shared or Exclusive.
	ErrInvalidMode = errors.New("deadlock: invalid lock mode")
	// ErrAlreadyWaiting is returned by Acquire when the transaction already has a
	// pending request: under two-phase locking a transaction waits for one lock at a time.
	ErrAlreadyWaiting = errors.New("deadlock: transaction is already waiting")
	// ErrInvalidWorkload is returned by Workload.Generate and Simulate for a
	// workload or option value that cannot be simulated (negative counts,
	// ratios outside [0,1], duplicate transaction IDs...).
	ErrInvalidWorkload = errors.New("deadlock: invalid workload")
	// ErrStuck is returned by Simulate when transactions remain unfinished
	// with nothing left to happen: a wait that no policy resolves. It would be
	// a bug in a policy; tests assert it never happens.
	ErrStuck = errors.New("deadlock: simulation stuck")
	// ErrLimit is returned by Simulate, with the Result so far, when
	// Options.MaxEvents or Options.MaxTime stops a run before every
	// transaction has committed.
	ErrLimit = errors.New("deadlock: simulation limit reached")
	// ErrInvariant is returned by Simulate with Options.Check when an internal
	// invariant is broken (incompatible holders, a cycle under a prevention policy).
	ErrInvariant = errors.New("deadlock: invariant violated")
	// ErrNotSerializable is matched (errors.Is) by the *NotSerializableError
	// that CheckSerializable returns.
	ErrNotSerializable = errors.New("deadlock: history is not conflict-serializable")
)
