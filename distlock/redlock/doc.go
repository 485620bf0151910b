// Package redlock is a distlock backend on N independent Redis masters
// (the Redlock algorithm): a lock is held when a majority (N/2+1) of the
// masters accepted SET key value NX PX ttl within the lock's validity,
// validity = TTL − time spent acquiring − clock drift (DriftFactor·TTL +
// 2 ms). Requests go to every master in parallel, each bounded by a short
// per-node timeout; after a failed attempt the lock is deleted (Lua
// compare-and-delete) on EVERY master, also those that did not answer,
// since a timed-out request may still have been applied (an attempt that
// every master plainly refused has nothing to delete). A failed attempt
// returns once the masters that accepted it have answered their delete
// (at most Config.CleanupTimeout; at once if its context ended), so the
// next attempt, its own or another locker's, does not find it there; the
// deletes on masters that did not answer go on in the background. Extend is a
// compare-and-pexpire that must reach a majority again within the new
// validity.
//
// Redlock alone does not give mutual exclusion under process pauses, slow
// networks or clock jumps (Kleppmann, "How to do distributed locking",
// 2016). Every lease therefore carries a fencing token, minted from a
// fenced.Source (Config.Source) BEFORE acquiring and stored in the lock value together with
// a random holder id; storage that checks tokens with the package fenced
// rejects a paused holder's late write. Minting after acquiring would be
// unsafe: a holder paused between acquiring and minting could mint a token
// higher than its successor's.
//
// Each master also remembers the highest token that acquired the key
// (FenceKey) and refuses lower tokens; every acquisition and extension
// makes that record live at least the lock's TTL plus Config.FenceTTL, so
// it outlives the lock however long it is held. Any two majorities share a
// master, so a token lower than one that already acquired can never gather
// a majority: tokens increase strictly in acquisition order. A waiter keeps
// its token while the lock is busy and mints a new one only when a master
// reports it stale. A master restarted without persistence forgets both
// the lock and the highest token; restart it only after the longest TTL in
// use has passed (the delayed restart of the Redlock paper), and the
// storage check still rejects any stale write.
//
// # Hung masters
//
// An attempt is decided as soon as a majority accepted, or can no longer
// accept; a master that has not answered within Config.NodeTimeout (by
// default a fiftieth of the TTL, at least 50 ms) counts as failed. The locker enforces NodeTimeout itself, whatever the client
// options (go-redis applies a context deadline to the socket only with
// Options.ContextTimeoutEnabled): with one master frozen (SIGSTOP) and
// default options, Acquire, TryAcquire and Extend take milliseconds and
// Release at most NodeTimeout, and a TTL of 2 s still leaves ~1.8 s of
// validity. Every call also ends at once when its context is cancelled.
// Requests the caller stopped waiting for finish in per-master goroutines
// (by the client's ReadTimeout, 5 s by default, or at the node timeout
// with ContextTimeoutEnabled); each cleans up what its acquire may have
// set once it returns, if the attempt failed or the lease was released
// meanwhile: a delete sent while that master's SET may still be queued
// could otherwise run first and leave the lock there until its TTL. After
// an acquire request that failed (its SET may still be queued, behind or
// ahead of the cleanup) the cleanup also raises that master's fence key
// above the attempt's token, so the SET is refused as stale should it run
// later. Each cleanup is retried until the master answers, for up to the
// lock's TTL (at least Config.CleanupTimeout): masters that thaw within
// that time never keep a lock for an attempt that failed, and a later
// holder's lock is never deleted.
//
// # Client retries
//
// go-redis retries a request whose answer did not arrive (a read timeout
// shorter than NodeTimeout, a dropped connection) although the master may
// have applied it. The scripts answer a retry as they answered the first
// try: an acquire that finds the lock holding its own value has acquired
// it, and a release that finds the key gone while the fence key still
// holds its token has released it. Release reports distlock.ErrLeaseLost
// only when a majority shows another holder acquired the key since.
//
// Keys use the layout of package distlock/redislock (LockKey, FenceKey).
//
// Every Locker of one lock key must mint from the same Source (one
// sequence shared by all instances): the per-key highest-token check
// refuses tokens of a second, lower-counting source until it catches up.
//
// When fewer than a majority of the masters answer an Extend or a Release,
// the outcome is unknown: they return ErrNoQuorum, which matches
// concurkit.ErrOutcomeUnknown.
//
// # Use
//
// New(client, *Config) returns a Locker: the client is the list of masters (one go-redis client each), and
// Config.Source, the fenced.Source of the fencing tokens, is required (nil is
// an error matching concurkit.ErrInvalidArgument); every other field has a
// documented default. Acquire and TryAcquire hand out distlock.Leases; distlock.Do
// holds one while a function runs. Install observe.Hooks on the Acquire
// context to see lock waits, extensions (AutoExtend's failures included)
// and lease loss, reported with the package name "redlock". The package is
// named <system>lock, like every concurkit lock backend, so it never
// shadows the client library's own package name.
package redlock
