// Package locktest is the conformance suite every distlock backend runs:
// one set of tests for the distlock.Lease/Locker contract, so that six
// backends are held to the same rules.
//
//	func TestConformance(t *testing.T) {
//		locktest.Run(t, func(t *testing.T) distlock.Locker { return newLocker(t) }, locktest.Options{})
//	}
//
// Run covers mutual exclusion (16 goroutines × 200 critical sections,
// asserted with a CompareAndSwap flag inside each section), tokens strictly
// increasing in acquisition order, TryAcquire on a held key, Release of an
// expired lease never deleting a successor's lock, cancellation while
// waiting, bad input, the lease context after Release, Extend and
// auto-extend, goroutine leaks (goleak), and the Kleppmann scenario: a
// holder paused past its TTL writes after its successor, and storage
// guarded by the package fenced rejects it, while the same run without
// fencing (the negative control) lets it overwrite the successor's data.
//
// It is imported only by tests.
package locktest
