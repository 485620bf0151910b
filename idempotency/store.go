package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// Defaults for zero fields of Config, Options and ReapOptions.
const (
	// DefaultTTL is how long a key is kept after its last run: a retry
	// after that is a new request.
	DefaultTTL = 24 * time.Hour
	// DefaultLockTimeout is how long a call may hold a key before a retry
	// may take it over (the holder is presumed crashed). Each phase of
	// DoPhases refreshes the lock.
	DefaultLockTimeout = 90 * time.Second
	// DefaultTable is the key table of the SQL stores (created by the
	// toolkit migrations) and the default DynamoDB table name.
	DefaultTable = "concurkit_idempotency_keys"
	// DefaultMaxKeyLength bounds a key, in bytes.
	DefaultMaxKeyLength = 255
	// MaxPrincipalLength bounds a principal, in bytes.
	MaxPrincipalLength = 255
	// MaxPointLength bounds a recovery point (a phase name), in bytes.
	MaxPointLength = 255
)

// Recovery points every key passes through: Started when it is first
// claimed, Finished when its result is stored. DoPhases adds the names of
// its phases in between.
const (
	Started  = "started"
	Finished = "finished"
)

// Table names the key table of a store. The zero value is DefaultTable in
// the connection's default schema (PostgreSQL search_path, MySQL
// database); Schema is ignored by DynamoDB. The table's columns are fixed:
// see the toolkit migrations (migrations/postgres/toolkit and
// migrations/mysql/toolkit, 0002_idempotency).
type Table struct {
	Schema string
	Name   string
}

// Response is a stored result: an HTTP response's status, the headers the
// middleware was told to keep (Config.Headers) and the body, byte for
// byte. Do stores its result as Status 200 with the JSON encoding of the
// value as Body, and an error kept by Options.StoreError as Status 500
// with the error's text. A result too large for the store is replaced by a
// marker: Status 410, a problem+json Body of type ResponseNotStoredType.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Lock identifies one run's hold on a key: ID is a random number the run
// chose when it claimed the key. Every write that finishes or advances the
// run is conditional on the row still carrying this ID and being locked,
// so a run whose key was taken over after LockTimeout (or reaped) cannot
// overwrite its successor's work: it gets ErrLockLost.
type Lock struct {
	Principal string
	Key       string
	ID        int64
}

// ClaimRequest is what a Store's Claim receives.
type ClaimRequest struct {
	Principal string
	Key       string
	// Fingerprint is the SHA-256 of the request (32 bytes).
	Fingerprint []byte
	// LockID is the new lock's ID, chosen by the caller (random, positive).
	LockID int64
	// Now is the caller's clock; LockTimeout and TTL are positive.
	Now         time.Time
	LockTimeout time.Duration
	TTL         time.Duration
}

// Stale is the lock time at or before which a lock has timed out.
func (r ClaimRequest) Stale() time.Time { return r.Now.Add(-r.LockTimeout) }

// ExpiresAt is the expiry a claim sets: Now + TTL.
func (r ClaimRequest) ExpiresAt() time.Time { return r.Now.Add(r.TTL) }

// Record is a key's stored state, as a Store's Claim returns it.
type Record struct {
	Principal   string
	Key         string
	Fingerprint []byte
	// LockID is the ID of the last run that claimed the key.
	LockID int64
	// LockedAt is when the running call took the lock or last refreshed
	// it (a phase of DoPhases), zero when no call runs.
	LockedAt time.Time
	// RecoveryPoint is Started, a phase name, or Finished.
	RecoveryPoint string
	// Attempts counts the runs since the key was created: 1 for the first.
	Attempts int64
	// Response is the stored result once RecoveryPoint is Finished.
	Response                        *Response
	CreatedAt, LastRunAt, ExpiresAt time.Time
}

// Store keeps idempotency keys. The adapters implement it:
// idempotencypg.Store (PostgreSQL), idempotencymysql.Store (MariaDB,
// MySQL) and idempotencydynamo.Store (DynamoDB). Applications do not call
// its methods: they pass a Store to Middleware, Do, DoPhases and Reap,
// which take the time from their clock and fence every write with the
// Lock of the claim.
//
// All methods must be safe for concurrent use.
type Store interface {
	// Claim atomically creates the key, locked for this call (LockID,
	// LockedAt = Now, RecoveryPoint Started, Attempts 1, ExpiresAt = Now
	// + TTL), unless it exists. An existing key is claimed — locked with
	// LockID, Attempts incremented, ExpiresAt renewed, recovery point and
	// creation time kept — when its fingerprint matches, it is not
	// Finished, and it is not locked or its lock is at or before Stale();
	// an expired key (ExpiresAt at or before Now) is replaced as if absent
	// (Attempts 1). Otherwise nothing changes. Claim returns the key's
	// record after the call: the caller claimed it if and only if the
	// record carries its LockID and is locked. Two concurrent claims of a
	// key must never both succeed.
	Claim(ctx context.Context, r ClaimRequest) (Record, error)
	// Complete stores resp, sets the recovery point to Finished, unlocks
	// the key and sets its expiry to expiresAt, if l still holds the key;
	// otherwise it returns ErrLockLost. A response larger than the store
	// can keep is refused with an error matching ErrResponseTooLarge,
	// changing nothing (the caller then completes the key with a small
	// marker). A write that the store applied but whose answer was lost
	// and retried (by a driver or SDK) must not report ErrLockLost.
	Complete(ctx context.Context, l Lock, resp Response, expiresAt time.Time) error
	// Release unlocks the key, keeping its recovery point, if l still
	// holds it (otherwise ErrLockLost): the next claim resumes it.
	Release(ctx context.Context, l Lock) error
	// Reap deletes up to limit keys that expired at or before now and
	// returns how many it deleted.
	Reap(ctx context.Context, now time.Time, limit int) (int, error)
}

// TxStore is a Store whose keys live in the database of the caller's
// writes (PostgreSQL, MariaDB/MySQL), so that a phase's writes and the
// key's new recovery point commit in one transaction; DoPhases needs one.
// Tx is the driver's transaction type (pgx.Tx, *sql.Tx).
type TxStore[Tx any] interface {
	Store
	// Advance runs fn in one transaction with an update of l's key,
	// fenced by l.ID (ErrLockLost when l no longer holds it, with fn's
	// writes rolled back). Before fn, the lock is refreshed (LockedAt =
	// now) and, unless point is Finished, the recovery point becomes
	// point; fn's response is then ignored. When point is Finished, fn
	// must return a non-nil response, which is stored in the same
	// transaction, after fn: the key is completed (unlocked, expiry
	// expiresAt); one larger than the store can keep fails the
	// transaction with an error matching ErrResponseTooLarge. The adapter may run fn more than once, each time in a
	// new transaction (deadlock or serialization failure).
	Advance(ctx context.Context, l Lock, point string, now, expiresAt time.Time, fn func(ctx context.Context, tx Tx) (*Response, error)) error
}

// outcome is what claiming a key found.
type outcome int

const (
	// created: the key was new (or had expired): run.
	created outcome = iota + 1
	// resumed: the key was released by an earlier run that failed or
	// panicked, or its holder's lock timed out: run again, from the
	// recovery point.
	resumed
	// inProgress: another call holds the key: nothing runs (409).
	inProgress
	// completed: the key has a stored result: replay it.
	completed
	// mismatch: the key belongs to another request: nothing runs (422).
	mismatch
)

var outcomeNames = [...]string{"", "created", "resumed", "in progress", "completed", "mismatch"}

func (o outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

// classify says what rec, the record Claim returned for r, means. It is
// written once for every store, from the contract of Store.Claim.
func classify(r ClaimRequest, rec Record) outcome {
	if rec.LockID == r.LockID && !rec.LockedAt.IsZero() {
		if rec.Attempts <= 1 {
			return created
		}
		return resumed
	}
	expired := !rec.ExpiresAt.After(r.Now)
	timedOut := rec.LockedAt.IsZero() || !rec.LockedAt.After(r.Stale())
	match := string(rec.Fingerprint) == string(r.Fingerprint)
	switch {
	case expired || (match && rec.RecoveryPoint != Finished && timedOut):
		// The record is older than the claim, which found the key in
		// another state: a concurrent call claimed it first.
		return inProgress
	case !match:
		return mismatch
	case rec.RecoveryPoint == Finished && rec.Response != nil:
		return completed
	}
	return inProgress
}

// claim claims r.Key with r.LockID and classifies the result. A caller
// whose context has already ended claims nothing. Once sent, the claim
// runs to its answer on a context that keeps ctx's values but not its
// cancellation (bounded by cleanupBudget): a statement abandoned when its
// caller gives up may still be applied by the server after the caller
// moved on — its release would then run first and find nothing, and the
// key would stay locked until LockTimeout with nothing running. Waiting
// for the answer orders any release after the claim.
func claim(ctx context.Context, s Store, r ClaimRequest) (Record, outcome, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, 0, err
	}
	cctx, cancel := cleanupContext(ctx)
	rec, err := s.Claim(cctx, r)
	cancel()
	if err != nil {
		// The claim may have been applied before the error (a lost
		// answer, the budget ran out): unlock it if so, so that the key
		// stays retryable now rather than after LockTimeout.
		release(ctx, s, Lock{Principal: r.Principal, Key: r.Key, ID: r.LockID})
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(err, cerr)
		}
		return Record{}, 0, err
	}
	return rec, classify(r, rec), nil
}

// newLockID returns a random positive int64. math/rand/v2's global source
// is seeded from the OS and safe for concurrent use; lock IDs need to be
// unique, not secret.
func newLockID() int64 { return rand.Int64N(math.MaxInt64) + 1 }

// cleanupBudget bounds a claim once sent, and the writes that end a run
// after its caller's context ended (storing the result, releasing the
// key).
const cleanupBudget = 10 * time.Second

// cleanupContext returns a context that keeps ctx's values but not its
// cancellation, bounded by cleanupBudget: a claim's answer must be
// awaited, and a run's result stored, even if the client went away.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupBudget)
}

// hashFingerprint is what the stores keep: SHA-256 of the caller's
// fingerprint, so the stored value has a fixed size whatever the caller
// gives.
func hashFingerprint(fp []byte) []byte {
	h := sha256.Sum256(fp)
	return h[:]
}
