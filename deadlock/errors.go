package deadlock

import (
	"errors"

	"github.com/concurkit/concurkit"
)

// The bad-input errors match concurkit.ErrInvalidArgument as well as
// themselves (errors.Is), like every bad-input error of the module; the
// root package is stdlib-only, so deadlock still imports nothing but the
// standard library and it.
var (
	// ErrInvalidMode is returned for a lock mode other than Shared or
	// Exclusive. It matches concurkit.ErrInvalidArgument.
	ErrInvalidMode = concurkit.InvalidArgumentError("deadlock: invalid lock mode")
	// ErrAlreadyWaiting is returned by Acquire when the transaction already
	// has a pending request: under two-phase locking a transaction waits
	// for one lock at a time, so the request is a caller's mistake and it
	// matches concurkit.ErrInvalidArgument.
	ErrAlreadyWaiting = concurkit.InvalidArgumentError("deadlock: transaction is already waiting")
	// ErrInvalidWorkload is returned by Workload.Generate, Simulate,
	// ParsePolicy and ParseVictim for a workload, option value or name that
	// cannot be simulated (negative counts, ratios outside [0,1], duplicate
	// transaction IDs, an unknown policy...). It matches
	// concurkit.ErrInvalidArgument.
	ErrInvalidWorkload = concurkit.InvalidArgumentError("deadlock: invalid workload")
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
	// ErrNoHistory is returned by CheckSerializable for a nil history and
	// by Result.CheckSerializable for a run simulated without
	// Options.History: there is nothing to check, which must not pass as
	// serializable. It matches concurkit.ErrInvalidArgument.
	ErrNoHistory = concurkit.InvalidArgumentError("deadlock: no history recorded")
)
