// Package redisnode is the lock protocol on one Redis node, shared by the
// single-server backend (distlock/redislock) and the Redlock backend
// (distlock/redlock), so the Lua scripts, the lock value encoding and the
// fencing-token rule are written once:
//
//   - acquire.lua takes the lock only if it is free and the caller's token
//     is not lower than the highest token that ever acquired the key
//     (recorded under FenceKey(key), which shares LockKey(key)'s Redis
//     Cluster hash slot and never equals another user key's Redis key);
//   - extend.lua and release.lua are compare-and-pexpire and
//     compare-and-delete on the lock value, so an expired holder never
//     renews or deletes its successor's lock;
//   - every script that sets or renews a lock keeps the fence record
//     alive for the lock's TTL plus the backend's FenceTTL, so the record
//     outlives the lock however long it is extended;
//   - acquire.lua and release.lua are idempotent, because go-redis
//     retries a request whose answer it did not get (a read timeout,
//     MaxRetries 3 by default) although the server may have applied it:
//     an acquire that finds the lock holding its own value acquired it;
//     a release that finds the key gone while the fence record still
//     holds its token released it (nobody held the lock after it);
//   - retire.lua undoes an acquisition whose outcome is unknown: it
//     deletes the lock if it holds the acquisition's value and raises the
//     fence record above its token, so the SET, should it still be queued
//     in the server and run later, is refused as stale. One answer is a
//     confirmed cleanup whatever the order in which the two run; Persist
//     retries it until the server answers, for a bounded time;
//   - Attempt mints a token before taking the lock (never after: a holder
//     paused between taking the lock and minting could otherwise mint a
//     token above its successor's), reuses it while the lock is merely
//     busy and mints a fresh one when a node calls it stale;
//   - Request bounds a request by the caller's context whatever the
//     client options (go-redis ignores context deadlines on the socket
//     without ContextTimeoutEnabled, and a context's cancellation with
//     it): the request then runs in a goroutine of a Background, and one
//     given up on can be undone after it returns. Every goroutine a
//     backend leaves behind (abandoned requests, cleanups) runs through
//     its Background.
//
// The backends keep what differs: one node versus a majority of
// independent masters, validity accounting and error reporting.
package redisnode
