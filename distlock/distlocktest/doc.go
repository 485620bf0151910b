// Package distlocktest is the conformance suite of the distlock.Locker
// contract: one set of tests that concurkit's six backends pass, and that
// a Locker of your own can be checked against from your own tests:
//
//	func TestMyLocker(t *testing.T) {
//		distlocktest.Run(t, func(t *testing.T) distlock.Locker {
//			return newMyLocker(t) // a new instance, as another process would have
//		}, distlocktest.Options{})
//	}
//
// Run covers mutual exclusion (16 goroutines × 200 critical sections,
// asserted with a CompareAndSwap flag inside each section), tokens strictly
// increasing in acquisition order, TryAcquire on a held key, the handover
// (a successor's Acquire returns only after the previous holder's lease
// ended locally: Valid false, Context done), Release of an expired lease
// never deleting a successor's lock, cancellation while waiting, bad
// input (errors matching concurkit.ErrInvalidArgument), the lease context,
// Valid and Deadline after Release and Extend, auto-extend, the events
// reported to observe.Hooks, goroutine leaks (goleak), and the Kleppmann
// scenario. Options adapt it: the TTLs, how a holder is made to lose its
// lock (Expire), the storage of the Kleppmann scenario (Store), which
// tests a Locker cannot take part in (NoExpiry, NoHooks).
//
// The Kleppmann scenario runs rounds in which a holder is paused past its
// TTL (Options.Expire) until the lock was handed over, then resumes at a
// random point and writes while its successor writes; the test does not
// order the two writes. Without fencing at least one round must end with
// a stale holder's write stored after a newer holder's (the negative
// control: the lock alone does not protect storage); with storage guarded
// by the package fenced no round may, and a late write must have been
// rejected with fenced.ErrStaleToken. The storage is a Store: by default
// PostgresStore on the test PostgreSQL (see package testkit for where it
// is found).
//
// The recipes built on a Locker have suites of their own, which check the
// recipe and, through it, the Locker: Election (package
// distlock/election: one leader at a time, strictly increasing terms, a
// deposed leader fenced out of storage and off the board, Lead, Observe),
// Semaphore (distlock/semaphore: never more than N holders, per-permit
// tokens, a dead holder's permit reused), RWLock (distlock/rwlock:
// readers overlap, writers exclusive, writer preference, upgrade refused),
// MultiLock (distlock/multilock:
// overlapping sets never held at once and never deadlocked, rollback on
// cancellation, per-key fencing). concurkit runs each on all six backends.
//
// The suite is itself tested: its own tests run it, in a child process,
// on reference lockers with one deliberate flaw each (validity 2×TTL,
// Release deleting a successor's lock, tokens not increasing, no hooks, a
// store that ignores tokens) and assert that a named suite test reports it.
//
// It is meant for tests (it imports testing and testkit).
package distlocktest
