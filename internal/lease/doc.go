// Package lease is the lease state machine shared by every distlock
// backend, so the rules of the distlock.Lease contract are written once:
//
//   - a Lease holds its key, its fencing token and a context;
//   - the context is cancelled when the safe validity ends (acquisition
//     start + TTL − clock drift − safety margin; each successful Extend
//     moves the deadline), when the backend reports the lease lost (Lost,
//     e.g. a session expired or a connection died), or on Release;
//   - Release runs the backend's compare-and-delete exactly once; a second
//     Release returns nil; a Release after the lease was lost returns
//     distlock.ErrLeaseLost but still runs the backend cleanup (which must
//     never delete a successor's lock);
//   - an optional auto-extend goroutine renews the lease every TTL/3 and
//     stops on release or loss.
//
// Backends supply two callbacks (Backend.Extend, Backend.Release) and call
// Lost from their own watchers. The package also holds the helpers every
// backend needs around acquisition: Resolve (option and key validation
// with defaults) and Poll (a retry loop for backends that can only poll).
package lease
