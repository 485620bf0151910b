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
//   - Attempt mints a token before taking the lock (never after: a holder
//     paused between taking the lock and minting could otherwise mint a
//     token above its successor's), reuses it while the lock is merely
//     busy and mints a fresh one when a node calls it stale;
//   - Request bounds a request by the caller's context whatever the
//     client options (go-redis ignores context deadlines on the socket
//     without ContextTimeoutEnabled): the request then runs in a goroutine
//     of a Background, and one given up on can be undone after it returns.
//
// The backends keep what differs: one node versus a majority of
// independent masters, validity accounting and error reporting.
package redisnode
