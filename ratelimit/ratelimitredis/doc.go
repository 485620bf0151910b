// Package ratelimitredis is the Redis store of package ratelimit: a
// ratelimit.Limiter whose every decision is one Lua script, so that the
// check and the count are one atomic step on the server and any number of
// processes share exact counts.
//
// # Use
//
// New(client, *Config) returns a Limiter on a go-redis v9 client
// (*redis.Client, *redis.Ring or *redis.ClusterClient); a nil Config is
// GCRA on time.Now. Allow and AllowN decide; Reset forgets a key. Give
// the client ContextTimeoutEnabled so that a context deadline (the
// middleware's Config.Timeout) also bounds a request to a hung server;
// without it go-redis waits for its ReadTimeout. A client that retries
// (go-redis's MaxRetries) may run a script twice for one request when an
// answer is lost: the request is then counted twice, never admitted twice.
//
// # Scripts
//
// window.lua and gcra.lua are embedded with go:embed and run with EVALSHA,
// falling back to EVAL when the server does not have them (go-redis's
// Script does both). They take the caller's clock as an argument rather
// than calling TIME (see the package ratelimit doc on clocks), and count
// in whole microseconds since the Unix epoch, exact in Lua's numbers.
//
//   - FixedWindow: a hash per key, e = the window's end and c = the count.
//     A call for a newer window than the stored one starts it (count = n)
//     and sets the key's expiry with PEXPIRE — only then, so the TTL never
//     moves while the window runs; a call for the stored window is
//     admitted and counted with HINCRBY only if c + n ≤ Rate. The stored
//     window end, not the TTL, decides when a window is over; the TTL
//     (the window's rest, plus one period and one second for lagging
//     clocks) only reclaims memory.
//   - GCRA: a string per key, the theoretical arrival time, set with a
//     PX expiry at that time plus one second (after it, a missing key
//     means the same as the stored one).
//
// # Keys
//
// A rate-limit key k lives in Redis as "ck:{E}:rl" (WindowKey) or
// "ck:{E}:gcra" (GCRAKey), E being k with '%', '{' and '}'
// percent-encoded, like the keys of distlock/redislock. Any key is valid
// (up to ratelimit.MaxKeyLen bytes of UTF-8), no two keys share a Redis
// key, and each script touches one key, so a Redis Cluster needs nothing
// more; the hash tag {E} keeps a key's two records in one slot (Reset
// deletes both in one script).
//
// Redis without persistence forgets every count when it restarts; each
// key then gets its quota again once.
package ratelimitredis
