// Package distlock defines the contract shared by concurkit's distributed
// lock backends (subpackages redis, redlock, zookeeper, etcd, dynamodb and
// postgres): a Locker hands out Leases, and every Lease carries a
// monotonic fencing token that the package fenced checks in storage.
//
// A lock with a time-to-live alone cannot guarantee mutual exclusion: a
// process paused by garbage collection, a slow network or a clock jump can
// outlive its lease and write after another holder took over. The fencing
// token closes that gap: storage accepts a write only with a token at least
// as high as any it has seen.
//
// A Lease also tells its holder when to stop: its Context ends, Valid turns
// false and Deadline passes before the server may hand the lock to another
// holder (the TTL minus a clock-drift allowance and a safety margin).
// Valid reads the clock at call time, so it is right even right after a
// pause, when the timer behind Context has not fired yet. These checks end
// work early; they cannot stop a write that a paused process already began,
// which is why the write itself must be fenced.
//
// Release is bounded: its server-side cleanup ignores the cancellation of
// the caller's context (a cancelled request still releases its lock) but
// ends at a cleanup timeout (DefaultCleanupTimeout unless the backend says
// otherwise), and Release returns by the caller's deadline, reporting an
// unconfirmed release if the cleanup was not done by then; the server frees
// the lock at its TTL at the latest.
package distlock
