// Package lease is the lease state machine shared by every distlock
// backend, so the rules of the distlock.Lease contract are written once:
//
//   - a Lease holds its key, its fencing token and a context;
//   - its safe validity ends at the deadline: acquisition start + TTL −
//     clock drift − safety margin, moved by each successful Extend (an
//     Extend with another ttl keeps the configured allowances, scaled up
//     for a longer ttl). A lease whose validity is already over when New
//     runs starts lost. Validity never comes back: an Extend whose backend
//     call returns after the deadline cannot revive the lease;
//   - the context is cancelled when the deadline passes (a timer), when
//     the backend reports the lease lost (Lost, e.g. a session expired or
//     a connection died), or on Release;
//   - Valid and Err read the monotonic clock at call time, so after a
//     process pause they report the expiry before the timer has run, and
//     mark the lease lost at once; Deadline returns the deadline (ok false
//     for a lease without TTL). These are local checks: only fenced
//     writes protect storage;
//   - Release marks the lease released and cancels its context at once,
//     then runs the backend's compare-and-delete exactly once, in a
//     goroutine, with a context that ignores the caller's cancellation but
//     ends at Config.CleanupTimeout (default distlock.DefaultCleanupTimeout).
//     Release returns when the cleanup ends or the caller's context does
//     (then with an "unconfirmed" error matching ctx.Err() and
//     concurkit.ErrOutcomeUnknown, as is a cleanup that failed); a later
//     Release waits for the same cleanup and reports its outcome if no
//     call did yet, else nil. A Release after the lease was lost returns
//     distlock.ErrLeaseLost but still runs the cleanup (which must never
//     delete a successor's lock);
//   - an optional auto-extend goroutine renews the lease every TTL/3 and
//     stops on release or loss; Release cancels an Extend in flight;
//   - the hooks given in Config (the observe.Hooks of the Acquire call's
//     context) hear of every Extend attempt, explicit or automatic
//     (LeaseExtend, with its error), and of the loss once (LeaseLost, with
//     its cause; never for a released lease), on the goroutine that
//     caused it, outside the lease's mutex. Without hooks nothing is
//     reported and nothing allocated.
//
// Backends supply two callbacks (Backend.Extend, Backend.Release), honour
// the contexts they get, and call Lost from their own watchers. The
// package also holds the helpers every backend needs around acquisition:
// Resolve (option and key validation with defaults), Poll (a retry loop
// for backends that can only poll) and ReportWait (the LockWait event of
// an acquisition that had to wait, which Poll reports itself).
package lease
