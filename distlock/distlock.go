package distlock

import (
	"context"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock/internal/sentinel"
	"github.com/concurkit/concurkit/fenced"
)

// Errors shared by every backend. Each has an ErrorType method, so
// observe.ErrorType reports it by a stable name (given in brackets).
var (
	// ErrNotAcquired ["not_acquired"]: the lock is held by another holder
	// (TryAcquire), or could not be obtained before the caller's context
	// ended (joined with ctx.Err()), or a quorum could not be reached.
	ErrNotAcquired error = sentinel.New("distlock: not acquired", "not_acquired")
	// ErrLeaseLost ["lease_lost"]: the lease expired, was taken over, or
	// its session ended.
	ErrLeaseLost error = sentinel.New("distlock: lease lost", "lease_lost")
	// ErrReleased ["released"] is the cause (context.Cause) of a lease
	// context that ended because its holder called Release. It does not
	// match ErrLeaseLost.
	ErrReleased error = sentinel.New("distlock: released", "released")
	// ErrClosed ["closed"]: the Locker was closed (see Closer). Acquire
	// and TryAcquire return it, joined with ErrNotAcquired, after Close,
	// and an Acquire that was waiting when Close was called ends with it.
	ErrClosed error = sentinel.New("distlock: locker closed", "closed")
	// ErrInvalidKey ["invalid_key"]: an empty key or one the backend
	// cannot store. It matches concurkit.ErrInvalidArgument, like every
	// other bad-input error of the distlock packages (a nil client, a
	// negative TTL or Config field), which are returned before any I/O.
	ErrInvalidKey error = sentinel.Wrap(concurkit.InvalidArgumentError("distlock: invalid key"), "invalid_key")
	// ErrTokenExhausted ["token_exhausted"]: the fencing tokens of a key
	// are used up — the backend's counter or token source reached its
	// maximum (math.MaxInt64, or a sequence's MAXVALUE) — so the lock can
	// never again be acquired with a token above the ones storage has
	// seen. It is permanent for that key (or source): tokens are never
	// wrapped or reset, since a lower token would be refused as stale, or
	// a stale holder's accepted. Returned by Acquire and TryAcquire of
	// dynamolock (the lock item's counter), pglock (the token sequence)
	// and redislock/redlock (a fenced.Source reporting
	// fenced.ErrTokenOverflow, which the error then matches as well).
	ErrTokenExhausted error = sentinel.New("distlock: fencing tokens exhausted", "token_exhausted")
)

// Lease is one acquisition of a lock. Each successful Acquire or
// TryAcquire returns a fresh Lease; a Lease is never reused. Its methods
// are safe for concurrent use.
//
// The lease's own view of its validity (Context, Deadline, Valid) is a
// local estimate: it ends before the server may hand the lock to another
// holder as long as the process runs and clocks drift less than the
// allowance, but a process paused between a check and a write (GC,
// SIGSTOP, a slow disk) writes after its lease ended all the same. Only a
// fenced write (package fenced, with Token) protects storage; use the
// local checks to stop work early, never as the guard.
type Lease interface {
	// Key returns the locked key.
	Key() string
	// Token returns the fencing token of this acquisition. Tokens of one
	// key are strictly increasing in acquisition order; pass the token to
	// the package fenced so storage rejects writes of a holder that lost
	// the lock.
	Token() fenced.Token
	// Context returns a context that is cancelled when the lease is lost,
	// reaches the end of its safe validity (Deadline) without being
	// extended, or is released. context.Cause tells which: an error
	// matching ErrLeaseLost (lost or expired) or ErrReleased. The
	// cancellation at the deadline comes from a timer, which fires late
	// when the process was paused; Valid does not wait for it.
	Context() context.Context
	// Deadline returns the end of the lease's safe validity: the start of
	// the acquiring request plus the TTL, minus a clock-drift allowance and
	// a safety margin, moved by each successful Extend. It is never later
	// than the start of the Acquire call plus Options.TTL. ok is false for
	// a lease without time-based validity, which lasts until it is lost or
	// released (a ZooKeeper session's lock), as with
	// context.Context.Deadline. The value is kept after the lease ended.
	Deadline() (deadline time.Time, ok bool)
	// Valid reports whether the lease is still held: not released, not
	// lost, and the monotonic clock at the time of the call is before
	// Deadline. It does not wait for the expiry timer: right after a pause
	// it already reports false, and it marks the lease lost at once, so
	// Context is done and context.Cause reports the expiry when Valid
	// returns false. A true result can be stale by the time the caller
	// acts on it: fenced writes remain the real guard.
	Valid() bool
	// Extend renews the lease for ttl from now; ttl 0 means the TTL given
	// at acquisition. It returns an error matching
	// concurkit.ErrInvalidArgument for a negative ttl or one that leaves no
	// validity after the drift allowance and margin, and ErrLeaseLost if
	// the lease was already lost, expired or released, or the server says
	// it is no longer ours. Releasing the lease cancels an Extend in
	// flight. Every attempt is reported to the observe.Hooks of the
	// Acquire call's context (LeaseExtend), with its error.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the lock up. It marks the lease released and cancels
	// Context at once, then deletes the lock on the server (never a
	// successor's). That cleanup ignores the cancellation of ctx, so a
	// cancelled request still releases its lock, but it is bounded by a
	// cleanup timeout (DefaultCleanupTimeout unless the backend documents
	// another). Release returns when the cleanup finished or when ctx
	// ends, whichever comes first; in the second case the cleanup goes on
	// in the background until the cleanup timeout, and Release returns an
	// error that says the release is unconfirmed, matching both
	// concurkit.ErrOutcomeUnknown and ctx.Err() (the server frees the lock
	// at its TTL or session end at the latest). A cleanup that failed
	// (timeout, connection error, no quorum) is unconfirmed as well and
	// matches concurkit.ErrOutcomeUnknown. Releasing a lease that was lost
	// or expired still runs the cleanup and returns an error matching
	// ErrLeaseLost. A later call waits for the same cleanup (bounded by its
	// own ctx) and returns its outcome if no earlier call returned it, nil
	// otherwise: releasing twice returns nil.
	Release(ctx context.Context) error
}

// Locker is implemented by every backend (and can be implemented by a
// user's own; package distlocktest checks one against this contract).
//
// The observe.Hooks of the context given to Acquire or TryAcquire (see
// observe.WithHooks) receive the acquisition's events: LockWait when it
// could not succeed at once (acquired after waiting or polling, or not),
// and, for the lease it returns, LeaseExtend after every extension attempt
// (explicit or AutoExtend) and LeaseLost once when the lease is lost or
// expires (never for a lease its holder released).
type Locker interface {
	// Acquire blocks until the lock on key is acquired or ctx ends; then it
	// returns errors.Join(ErrNotAcquired, ctx.Err()).
	Acquire(ctx context.Context, key string, opts *Options) (Lease, error)
	// TryAcquire makes one attempt and returns ErrNotAcquired at once if
	// the lock is held.
	TryAcquire(ctx context.Context, key string, opts *Options) (Lease, error)
}

// Closer is implemented by the Lockers of every concurkit backend. Close is
// for graceful shutdown: a Locker leaves work running in the background —
// the cleanup of a Release that returned at its caller's deadline, the
// undoing of an acquisition whose caller gave up while the request was in
// flight (the server may apply it later), Redlock's requests to slow
// nodes — and a process that exits before that work is done leaves locks
// behind until their TTL.
//
// Close releases every lease of the Locker that is still held (as
// Lease.Release does), ends Acquire calls still waiting (they return an
// error matching ErrClosed and ErrNotAcquired), refuses later
// acquisitions the same way, frees the backend's own resources (sessions),
// and waits until all of that and every background cleanup has finished
// or ctx ends. It returns nil when everything was confirmed; errors of
// releases or cleanups that could not be confirmed; or, when ctx ended
// first, an error matching both ctx.Err() and
// concurkit.ErrOutcomeUnknown (the cleanups go on, each within its own
// bound). Calling Close again waits again. Clients (Redis, etcd,
// DynamoDB, pgx pools) passed to a Locker are not closed: they are the
// caller's.
type Closer interface {
	Close(ctx context.Context) error
}

// Default option values.
const (
	// DefaultTTL is the lease validity when Options.TTL is zero.
	DefaultTTL = 10 * time.Second
	// DefaultCleanupTimeout bounds the server-side cleanup of Release
	// unless a backend documents its own bound.
	DefaultCleanupTimeout = 5 * time.Second
)

// Options tune one acquisition. A nil *Options or a zero field means the
// documented default; the caller's struct is never modified. Each backend
// documents what TTL means for it: a key expiry (redislock, redlock), a
// lease duration observed by waiters (dynamolock), an etcd lease TTL in
// whole seconds (etcdlock), a ZooKeeper session timeout (zklock), or the
// PostgreSQL session's idle_session_timeout (pglock).
type Options struct {
	// TTL is the lease validity. Zero means DefaultTTL; negative is bad
	// input (an error matching concurkit.ErrInvalidArgument).
	TTL time.Duration
	// AutoExtend, if true, starts a goroutine that extends the lease every
	// TTL/3 until it is released or lost. Off by default: no hidden
	// watchdog. Its failures are not returned to anyone: they are reported
	// to the hooks of the Acquire call's context (observe.Hooks.LeaseExtend)
	// and, once the lease is lost, end its Context.
	AutoExtend bool
}
