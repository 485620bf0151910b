// Package dynamolock is a distlock backend on one DynamoDB item per lock.
//
// A lease is taken with one conditional UpdateItem that sets the item's
// owner (a random per-lease secret), a fresh record version number (RVN)
// and the lease duration, and ADDs 1 to the item's token counter in the
// same write: the new counter value is the fencing token. The item is never
// deleted (Release removes only the owner), so the counter keeps rising
// across holders.
//
// Expiry is judged by duration observed locally, never by comparing clocks
// across machines: a waiter that finds the lock held notes the RVN and the
// lease duration it reads, and only if the RVN is still the same after it
// has itself watched that duration pass may it take the lock over, with a
// write conditioned on that RVN. The holder stops earlier: its lease
// context ends at acquisition start + TTL − drift − margin.
//
// Heartbeats (Extend, AutoExtend) write a new RVN on the condition that the
// owner is still this lease's secret. Conditioning on the owner, not on the
// previous RVN, is what makes an ambiguous heartbeat harmless
// (dynamolock#280): if a heartbeat times out after DynamoDB applied it, the
// retry still matches (the owner is unchanged), where a condition on the
// old RVN would fail and wrongly report the lease lost. Only this lease
// knows its 128-bit owner secret, so the condition admits no one else. The
// same secret resolves an ambiguous acquisition: a retry that finds the
// item owned by its own secret knows it holds the lock.
//
// # Keys, durations and tokens
//
// A key is stored as given: at most MaxKeyBytes (DynamoDB's 2048-byte
// partition-key limit) of valid UTF-8, else distlock.ErrInvalidKey before
// any request (DynamoDB would turn invalid bytes into U+FFFD, so two keys
// would share one lock). The lease duration written for waiters is the
// TTL rounded up to whole milliseconds; one too long for a time.Duration
// reads as the longest Duration. The counter stops at math.MaxInt64, the
// last token: the conditions of an acquisition require it to be below, and
// a used-up counter is distlock.ErrTokenExhausted, never a wrapped or reset
// token.
//
// # Errors and unresponsive servers
//
// A conditional-check failure means the lock is held. Throttling, server
// errors (5xx), transaction conflicts, timeouts and connection errors are
// retried by Acquire (with the owner secret, so an attempt that was
// applied unseen is recognised). A request DynamoDB refuses — missing
// table, validation, access denied — is returned at once, wrapped.
//
// Every request is bounded by Config.RequestTimeout, because the SDK's
// default HTTP client has no overall timeout, and by the caller's context.
// Acquire and TryAcquire return by the caller's deadline even when the
// server answers nothing (a frozen process): an acquisition request still
// in flight is left to finish in the background, and a lock it took is
// given back with a compare-and-delete. If that too times out, the lock
// is held by nobody until waiters have watched its lease duration pass —
// a delay, never two holders.
//
// # Use
//
// New(client, *Config) returns a Locker: the client is a *dynamodb.Client (aws-sdk-go-v2), and
// Config.Table, the lock table, is required (see CreateTable; nil or empty is
// an error matching concurkit.ErrInvalidArgument); every other field has a
// documented default. Acquire and TryAcquire hand out distlock.Leases; distlock.Do
// holds one while a function runs. Install observe.Hooks on the Acquire
// context to see lock waits, extensions (AutoExtend's failures included)
// and lease loss, reported with the package name "dynamolock". The package is
// named <system>lock, like every concurkit lock backend, so it never
// shadows the client library's own package name.
package dynamolock
