// Package redislock is a distlock backend on a single Redis server: the
// lock is a key taken with SET key value NX PX ttl, renewed with a Lua
// compare-and-pexpire and released with a Lua compare-and-delete, so an
// expired holder never renews or deletes its successor's lock.
//
// # Use
//
// New(client, *Config) returns a Locker: the client is a go-redis client (*redis.Client, *redis.Ring or
// *redis.ClusterClient), and
// Config.Source, the fenced.Source of the fencing tokens, is required (nil is
// an error matching concurkit.ErrInvalidArgument); every other field has a
// documented default. Acquire and TryAcquire hand out distlock.Leases; distlock.Do
// holds one while a function runs. Install observe.Hooks on the Acquire
// context to see lock waits, extensions (AutoExtend's failures included)
// and lease loss, reported with the package name "redislock". The package is
// named <system>lock, like every concurkit lock backend, so it never
// shadows the client library's own package name.
//
// # Fencing tokens
//
// A single Redis server cannot give out fencing tokens that survive its own
// restart, so the token comes from a fenced.Source (Config.Source, for
// example a PostgreSQL sequence) and is minted BEFORE the lock is taken; it is stored
// in the lock's value next to a random holder id. Minting after acquiring
// would be unsafe: a holder paused between SET and mint could mint a token
// higher than its successor's and storage would accept its stale write.
// Minted before, a paused holder's token is lower than its successor's, so
// storage rejects the paused holder, never the successor.
//
// The acquire script also keeps, per lock key, the highest token that ever
// acquired it (FenceKey) and refuses a token lower than that.
// This is what makes tokens strictly increasing in acquisition order: a
// waiter that minted its token long ago, while others acquired and released
// with newer tokens, is told its token is stale and mints a fresh one at
// once instead of taking the lock with a token storage would reject. A
// token is therefore reused across attempts while the lock is merely busy
// (no round trip to the source per poll) and replaced only when it went
// stale. Every acquisition and every extension sets the fence key's
// expiry to at least the lock's TTL plus Config.FenceTTL, so the fence key
// lives as long as the lock is held, however often it is extended, and
// FenceTTL past its release or expiry. Should the fence key be lost
// anyway (a server restart without persistence, FenceTTL elapsed after
// the lock ended) ordering falls back to the storage check alone: a late
// holder with a lower token is rejected by fenced, never its successor.
//
// # Keys
//
// A lock key k lives in Redis as "ck:{E}:lock" (LockKey) with its fence
// record in "ck:{E}:fence" (FenceKey), E being k with '%', '{' and '}'
// percent-encoded. Any string is a valid key: the two Redis keys of one
// lock share a Redis Cluster hash slot (the hash tag is {E}), so a
// *redis.ClusterClient works without the caller adding hash tags, and no
// two lock keys share a Redis key ("x:fence" is a lock of its own, not the
// fence record of "x"). Locks taken by versions before this layout used the
// bare key; do not run old and new versions against the same locks.
//
// # Client retries
//
// go-redis retries a request whose answer did not arrive (a read timeout,
// a dropped connection; MaxRetries 3 by default) although the server may
// have applied it. The scripts answer a retry as they answered the first
// try: an acquire that finds the lock holding its own value has acquired
// it (the expiry is reset), and a release that finds the key gone while
// the fence key still holds its token has released it. Release reports
// distlock.ErrLeaseLost only when another holder acquired the key since
// (another value holds the lock, or the fence key moved past the lease's
// token); a lock that vanished while nobody acquired it after the lease
// (an expiry nobody used, an operator's DEL) counts as released, since
// nobody held it after the lease.
//
// # Hung servers and cancellation
//
// Every call returns by its context's deadline, and at once when its
// context is cancelled, whatever the client's options: go-redis applies a
// context's deadline to the socket only with Options.ContextTimeoutEnabled,
// and never watches its cancellation, so a request under a context that
// can end runs in a goroutine the caller stops waiting for (a context that
// can never end, such as context.Background(), keeps it on the caller's
// goroutine). A request given up on finishes in the background (by the
// client's ReadTimeout, 5 s by default, or at the context's deadline with
// ContextTimeoutEnabled).
//
// An acquisition whose outcome is unknown (its request failed, or was
// given up on: it may still be queued in a frozen server) is retired in
// the background once its request returned: a script deletes the lock if
// it holds the acquisition's value and raises the fence key above its
// token, so that the SET, should it run only later, is refused as stale.
// The script is retried until the server answers, for up to the lock's
// TTL (at least Config.CleanupTimeout) after the request returned: a
// server that thaws within that time never keeps the key locked for an
// acquisition its caller gave up on, and a later holder's lock is never
// deleted. (A waiter whose token is not above the retired one is told its
// token is stale and mints a fresh one.) A server frozen longer
// may still apply the queued SET when it thaws; that lock expires by its
// TTL. Release waits for the caller's deadline or CleanupTimeout,
// whichever is sooner; a delete that never reaches the server leaves the
// lock to its TTL.
//
// Every Locker of one lock key must mint from the same Source (one
// sequence shared by all instances): the per-key highest-token check
// refuses tokens of a second, lower-counting source until it catches up.
// A Source that is used up (fenced.ErrTokenOverflow) makes Acquire return
// distlock.ErrTokenExhausted.
package redislock
