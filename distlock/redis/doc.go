// Package redis is a distlock backend on a single Redis server: the lock
// is a key taken with SET key value NX PX ttl, renewed with a Lua
// compare-and-pexpire and released with a Lua compare-and-delete, so an
// expired holder never renews or deletes its successor's lock.
//
// A single Redis server cannot give out fencing tokens that survive its own
// restart, so the token comes from a fenced.Source (for example a
// PostgreSQL sequence) and is minted BEFORE the lock is taken; it is stored
// in the lock's value next to a random holder id. Minting after acquiring
// would be unsafe: a holder paused between SET and mint could mint a token
// higher than its successor's and storage would accept its stale write.
// Minted before, a paused holder's token is lower than its successor's, so
// storage rejects the paused holder, never the successor.
//
// The acquire script also keeps, per lock key, the highest token that ever
// acquired it (key + FenceKeySuffix) and refuses a token lower than that.
// This is what makes tokens strictly increasing in acquisition order: a
// waiter that minted its token long ago, while others acquired and released
// with newer tokens, is told its token is stale and mints a fresh one at
// once instead of taking the lock with a token storage would reject. A
// token is therefore reused across attempts while the lock is merely busy
// (no round trip to the source per poll) and replaced only when it went
// stale. Should the fence key be lost (server restart without persistence,
// FenceTTL elapsed) ordering falls back to the storage check alone: a late
// holder with a lower token is rejected by fenced, never its successor.
//
// In Redis Cluster the lock key and its fence key must hash to the same
// slot: put a hash tag in the key ("{order-42}").//
// Every Locker of one lock key must mint from the same Source (one
// sequence shared by all instances): the per-key highest-token check
// refuses tokens of a second, lower-counting source until it catches up.
package redis
