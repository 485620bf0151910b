// Package idempotency makes state-changing operations safe to repeat:
// clients time out and resend, queues redeliver, jobs restart. A caller
// names each operation with an idempotency key; the first call runs and
// its result is stored; every repetition gets the stored result instead
// of running again. This package is the driver-neutral core (standard
// library only); the keys live in a Store from an adapter:
//
//	idempotency/idempotencypg     PostgreSQL (pgx v5)             Store, TxStore (phases)
//	idempotency/idempotencymysql  MariaDB, MySQL (database/sql)   Store, TxStore (phases)
//	idempotency/idempotencydynamo DynamoDB (aws-sdk-go-v2)        Store
//
// The SQL tables come from the toolkit migrations (package migrations,
// version 2: concurkit_idempotency_keys); the DynamoDB table from
// idempotencydynamo.CreateTable.
//
// # Three ways in
//
//   - Middleware, for net/http services: the Idempotency-Key header of
//     the IETF draft (draft-ietf-httpapi-idempotency-key-header), replays
//     byte for byte, 409 while in progress, 422 for a reused key. A rate
//     limiter goes inside it: mw(limit(handler)).
//   - Do, for any Go function: run fn once per (principal, key) and get
//     its value (JSON-encoded in the store) back on every repetition.
//   - DoPhases, for a multi-step operation on PostgreSQL or MariaDB: each
//     step commits with its recovery point in one transaction, and a
//     retry resumes after the last step that committed (Brandur Leach's
//     atomic phases).
//
// Reap deletes expired keys in batches.
//
// # What a key holds
//
// One row (or item) per (principal, key): keys are unique per principal —
// a user, tenant or API key — so one client's key can never replay
// another's response. With the key: the request's fingerprint (SHA-256;
// by default of the method, the target with its query sorted, the media
// type and the body, a JSON body in canonical form when that form is
// provably the same request), the lock of the run in progress (lock id and time, NULL when none runs), the recovery point
// ("started", the phases' names, "finished"), the stored response (status,
// the headers listed in Config.Headers, the body), the number of runs, and
// the creation, last-run and expiry times.
//
// # Claiming a key: one round trip, exactly one winner
//
// Every call starts by claiming the key, which is atomic in the store and
// finds one of: a new key (run); a key to resume (run again from its
// recovery point: an earlier run failed or panicked and released it, or
// held it longer than LockTimeout and is presumed crashed); a key in
// progress (409); a completed key (replay); a key made for another
// request, its fingerprint differing (422). Of concurrent claims of one
// key, exactly one runs.
//
//   - PostgreSQL: one statement. It reads the row in its snapshot; a key
//     that is completed, running or another request's is answered from
//     that read, with no write and no row lock (a replay costs one
//     indexed read). Otherwise it runs INSERT … ON CONFLICT DO UPDATE …
//     WHERE <claimable>, which locks the newest version of the row and
//     re-checks the condition on it, so of two racing claims one updates
//     and the other gets nothing back. Only when a racing claim committed
//     the row after the statement's snapshot does the statement return no
//     row at all: a second statement then reads it.
//   - MariaDB/MySQL: INSERT … ON DUPLICATE KEY UPDATE whose assignments
//     are conditional (the first one decides and sets the claimant's lock
//     id, the others test it in a form that holds whether assignments
//     see each other or not, so it is correct under every sql_mode,
//     MariaDB's SIMULTANEOUS_ASSIGNMENT included), under InnoDB's row
//     lock, then a read by
//     primary key: two round trips (MySQL has no RETURNING, and the
//     affected-row count depends on the DSN's clientFoundRows). Deadlocks
//     with a concurrent reaper are retried.
//   - DynamoDB: one UpdateItem with a condition expression, which returns
//     the item before the write when it succeeds and the blocking item when
//     it fails (ReturnValuesOnConditionCheckFailure), as AWS Lambda
//     Powertools does: status, expiration, in_progress_expiration.
//
// A claim is sent only while its caller's context is live, and once sent
// it is awaited to its answer even if that context ends (bounded by a few
// seconds): a statement abandoned mid-way may still be applied by the
// server after its caller moved on, which would leave the key locked until
// LockTimeout with nothing running. A claim that fails (the store is down)
// is answered with 503 by the middleware and stores nothing; if the claim
// may have been applied before its answer was lost, the key is released
// at once, after the claim returned, so it stays retryable. Do releases a
// key it claimed for a caller whose context ended meanwhile.
//
// # Fencing: a late run cannot overwrite its successor
//
// Each claim picks a random lock id. Storing a result, releasing the key
// and advancing a phase are conditional on the row still carrying that id
// and being locked. A run that held the key past LockTimeout (paused, cut
// off from the database) and was taken over is refused with ErrLockLost
// when it tries to store its result, and a phase's writes are rolled back
// with its recovery point: the stored result is always the successor's.
// This does not undo what the late run did outside the store; that is what
// phases and derived keys are for.
//
// # Failures and clients that give up
//
// A stored result is only ever the result of a run whose effects
// committed or definitely did not. The middleware stores every response
// the handler produced with its context live, 4xx and 5xx included (the
// draft's "original result, success or failure"), except those that say
// the request was not executed (Config.NotExecuted: 429 and 503 by
// default), which release the key. Once claimed, a request runs to
// completion whatever its client does — the handler's context does not
// end when the client disconnects — so a client that gave up and retries
// gets 409 while the run goes on, then the run's own response. The
// handler's context ends at 9/10 of LockTimeout: a handler still running
// then cannot tell what it did, so nothing is stored and the key is
// released. A request refused before the handler ran, or whose client was
// gone before the claim, stores nothing. A handler that panics leaves the
// key released (retryable) and the panic goes on. A response too large to
// store (Config.MaxResponseBytes, the store's own limit) completes the key
// with a marker: retries get 410 Gone and the handler never runs again.
//
// Do stores a value; an error of fn releases the key unless
// Options.StoreError keeps it as the result (then retries get a
// *ReplayedError; an error returned after ctx ended is never kept). If
// storing the result itself fails after the work was done, the response is
// still sent (Do returns the value with ErrNotStored) and the key stays
// locked until LockTimeout, after which a retry runs again: when that is
// not acceptable, use DoPhases, whose last transaction holds the work and
// the result together.
//
// # Time
//
// Locks time out after LockTimeout (default 90 s; a phase's transaction
// refreshes the lock, so it bounds one phase) and keys expire TTL after
// their last run (default 24 h), by the clock of the process that claims:
// servers sharing a store need roughly synchronized clocks. An expired key
// is treated as absent at once (its key may be reused for another
// request); Reap deletes expired keys in batches of bounded size (SKIP
// LOCKED on PostgreSQL). Config.Now, Options.Now and ReapOptions.Now
// inject a clock for tests.
//
// # Atomic phases and DynamoDB
//
// DoPhases needs a TxStore: the phase's writes and the key's new recovery
// point must commit in one transaction on one database, which DynamoDB
// and a key store on another database cannot give. On DynamoDB, use Do
// (or the middleware) with a single step. A phase that calls an outside
// service passes it Step.DerivedKey(), "<key>:<phase>", as that service's
// own idempotency key, so the call is idempotent too when the phase is
// retried. Phase names may not contain ':', so no two (key, phase) pairs
// share a derived key.
//
// # Keys on the wire
//
// The draft defines the Idempotency-Key field as an sf-string
// (Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"); many clients
// send the bare value. ParseKey accepts both, as one key: quoted, any
// printable ASCII with \" and \\ escapes; bare, visible ASCII without
// quotes or backslashes. Keys are 1 to 255 bytes. A missing key (when
// Config.Required), an invalid one or two Idempotency-Key fields are
// answered with 400; all errors are RFC 9457 problem+json documents.
//
// # The principal
//
// Config.Principal tells the middleware who is asking. Its default, one
// namespace for every client, is safe only when a single client uses the
// service: production services must derive it from authentication
// (PrincipalHeader reads a header set by an authenticating gateway).
package idempotency
