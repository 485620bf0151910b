// Package ratelimit limits how often each key (a user, an API key, a
// client address) may do something, counting exactly across any number of
// servers that share one store. It is the driver-neutral core: the Limit,
// Decision and Limiter types, the algorithms' contract and an HTTP
// middleware. It imports only the standard library; the counting lives in
// one adapter per store, so a program compiles only the driver it uses:
//
//   - ratelimit/ratelimitredis: Redis through go-redis v9, one Lua script
//     per decision;
//   - ratelimit/ratelimitpg: PostgreSQL through pgx v5, one statement per
//     decision, on tables of the toolkit migrations (version 5).
//
// There is no MariaDB/MySQL adapter. The exact check-and-count needs a
// conditional upsert that reports its own outcome in the same statement;
// MariaDB has neither a WHERE on ON DUPLICATE KEY UPDATE nor RETURNING
// for it, and the LAST_INSERT_ID(expr) workaround depends on whether the
// DSN sets clientFoundRows. A transaction with SELECT … FOR UPDATE would be
// exact but costs three round trips per request. Services on MariaDB use
// ratelimitredis.
//
// # Algorithms
//
// GCRA (the default) is the generic cell rate algorithm, the algorithm of
// redis_rate and throttled: a Limit{Rate, Period, Burst} spaces requests
// T = Period/Rate apart on average and lets Burst of them through at once.
// Each key stores one time, its theoretical arrival time (TAT); a request
// of cost n passes if max(TAT, now) + n·T ≤ now + Burst·T, and then moves
// the TAT there. It is O(1) in time and space and exact in its model: at
// one instant exactly Burst requests pass, and over any interval of length
// d at most Burst + d/T.
//
// FixedWindow admits Rate requests per window of length Period. Windows
// are aligned to the Unix epoch (per-minute windows start at second :00,
// per-day windows at midnight UTC), the same for every key, so a client
// may spend its quota at the end of one window and again at the start of
// the next: up to 2×Rate within one Period. GCRA has no such edge.
//
// # Exactness
//
// With limit L, at most L requests of a key are ever allowed in one
// window, and at most Burst at one instant with GCRA, however many servers
// ask at the same time: each decision checks and counts in one atomic step
// of the store (a Lua script, one SQL statement), and a request that is
// denied is not counted. The conformance suite (package ratelimittest)
// shows it with 10 independent clients released together by a barrier:
// exactly L allowed per window, and every Remaining value from L-1 down to
// 0 handed out exactly once.
//
// What is not promised: a store that loses its data (a Redis restart
// without persistence, a PostgreSQL crash or failover, since the tables
// are unlogged) forgets the counts, and each key gets its quota again
// once. A call that fails (timeout, lost connection) may or may not have
// counted its request. Decisions are only as consistent as the clocks:
// see below.
//
// # Clocks
//
// The time is the caller's: Config.Now of the adapter (time.Now by
// default), passed to the store as an argument (the scripts never call
// Redis's TIME, the statements never call now()). This makes decisions
// deterministic under an injected clock, so tests move time instead of
// sleeping, and gives Redis and PostgreSQL the same contract. Servers
// should run NTP: with FixedWindow, a server whose clock runs ahead starts
// the next window early for everybody (a lagging server counts into the
// newer window it finds, never back into an older one); with GCRA, a
// server ahead by δ admits up to δ/T requests early, one that lags is
// stricter.
//
// Times are counted in whole microseconds (exact in Redis's Lua numbers
// until the year 2200), so Period and T = Period/Rate are rounded up to a
// microsecond: a limit is never exceeded, and a GCRA rate whose interval
// is not whole microseconds is slightly lower than asked.
//
// # Decisions
//
// A Decision says whether the request may proceed, the quota Remaining
// after it (exactly that many requests of cost 1 would pass right now; 0
// when denied), RetryAfter (exactly when the denied request would pass, if
// nobody else asked meanwhile) and ResetAfter (when the key is back to its
// full quota).
//
// # HTTP
//
// Middleware wraps any http.Handler (http.ServeMux, or a router's). It
// keys requests with Config.Key (the client address by default, ClientIP)
// and answers a denied request with 429 Too Many Requests, Retry-After in
// whole seconds (rounded up, never early) and an RFC 9457 problem+json
// body of the draft's quota-exceeded type. Every decided response carries
// the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 (September 2025; the field
// syntax is the same in the working group's later editor's copy), as
// structured fields:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=0;t=30
//
// When the store fails or does not answer within Config.Timeout, the
// middleware fails closed by default (503 problem+json): a limiter that
// stops counting while its store is down no longer limits anything, and
// concurkit does not exceed a limit silently. Config.FailOpen lets
// requests through instead, for services that value availability over the
// limit; Config.OnError sees every error either way. Misconfiguration (an
// invalid limit, an empty key) is 500, never let through.
//
// # Keys in errors
//
// A key is often a secret (an API key) or personal data (a user id, a
// client address), and errors end up in logs: no error of this package or
// its adapters contains a key. They name it by KeyID, a short hash
// ("key#" and 12 hex digits of its SHA-256), and a store's own message
// that echoes the key is redacted the same way.
//
// # With idempotency keys
//
// Put this middleware inside idempotency.Middleware, next to the handler:
// idem(limit(handler)). A replay of a stored response, a 409 (in
// progress) and a 422 (key reused) are then answered before the limiter:
// they consume no quota and are never refused. The limiter's 429 and 503
// mean the request did not run: the idempotency middleware does not store
// them (its Config.NotExecuted) but releases the key, so the client's
// retry with the same key runs once the quota allows. In the other order
// every replay would count against the quota and could be refused. See
// idempotency's ExampleMiddleware_rateLimit.
package ratelimit
