// Package distlocktest is the conformance suite every distlock backend runs:
// one set of tests for the distlock.Lease/Locker contract, so that six
// backends are held to the same rules.
//
//	func TestConformance(t *testing.T) {
//		distlocktest.Run(t, func(t *testing.T) distlock.Locker { return newLocker(t) }, distlocktest.Options{})
//	}
//
// Run covers mutual exclusion (16 goroutines × 200 critical sections,
// asserted with a CompareAndSwap flag inside each section), tokens strictly
// increasing in acquisition order, TryAcquire on a held key, the handover
// (a successor's Acquire returns only after the previous holder's lease
// ended locally: Valid false, Context done), Release of an expired lease
// never deleting a successor's lock, cancellation while waiting, bad
// input, the lease context, Valid and Deadline after Release and Extend,
// auto-extend, goroutine leaks (goleak), and the Kleppmann scenario.
//
// The Kleppmann scenario runs rounds in which a holder is paused past its
// TTL (Options.Expire) until the lock was handed over, then resumes at a
// random point and writes while its successor writes; the test does not
// order the two writes. Without fencing at least one round must end with
// a stale holder's write stored after a newer holder's (the negative
// control: the lock alone does not protect storage); with storage guarded
// by the package fenced no round may, and a late write must have been
// rejected with fenced.ErrStaleToken.
//
// The suite is itself tested: its own tests run it, in a child process,
// on reference lockers with one deliberate flaw each (validity 2×TTL,
// Release deleting a successor's lock, tokens not increasing, a store
// that ignores tokens) and assert that a named suite test reports it.
//
// It is imported only by tests.
package distlocktest
