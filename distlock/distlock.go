package distlock

import (
	"context"
	"errors"
	"time"

	"github.com/concurkit/concurkit/fenced"
)

// Errors shared by every backend.
var (
	// ErrNotAcquired: the lock is held by another holder (TryAcquire), or
	// could not be obtained before the caller's context ended (joined with
	// ctx.Err()), or a quorum could not be reached.
	ErrNotAcquired = errors.New("distlock: not acquired")
	// ErrLeaseLost: the lease expired, was taken over, or its session ended.
	ErrLeaseLost = errors.New("distlock: lease lost")
	// ErrInvalidKey: an empty key or one the backend cannot store.
	ErrInvalidKey = errors.New("distlock: invalid key")
	// ErrInvalidOptions: a negative or otherwise unusable option value.
	ErrInvalidOptions = errors.New("distlock: invalid options")
	// ErrReleased is the cause (context.Cause) of a lease context that ended
	// because its holder called Release. It does not match ErrLeaseLost.
	ErrReleased = errors.New("distlock: released")
)

// Lease is one acquisition of a lock. Each successful Acquire or
// TryAcquire returns a fresh Lease; a Lease is never reused.
type Lease interface {
	// Key returns the locked key.
	Key() string
	// Token returns the fencing token of this acquisition. Tokens of one
	// key are strictly increasing in acquisition order; pass the token to
	// the package fenced so storage rejects writes of a holder that lost
	// the lock.
	Token() fenced.Token
	// Context returns a context that is cancelled when the lease is lost,
	// reaches the end of its safe validity (TTL minus clock drift and a
	// safety margin) without being extended, or is released.
	// context.Cause tells which: an error matching ErrLeaseLost (lost or
	// expired) or ErrReleased.
	Context() context.Context
	// Extend renews the lease for ttl from now; ttl 0 means the TTL given
	// at acquisition. It returns ErrLeaseLost if the lease was already lost
	// or expired.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the lock up. Releasing never removes a successor's lock.
	// Releasing twice returns nil; releasing a lost lease returns
	// ErrLeaseLost.
	Release(ctx context.Context) error
}

// Locker is implemented by every backend.
type Locker interface {
	// Acquire blocks until the lock on key is acquired or ctx ends; then it
	// returns errors.Join(ErrNotAcquired, ctx.Err()).
	Acquire(ctx context.Context, key string, opts *Options) (Lease, error)
	// TryAcquire makes one attempt and returns ErrNotAcquired at once if
	// the lock is held.
	TryAcquire(ctx context.Context, key string, opts *Options) (Lease, error)
}

// Default option values.
const (
	DefaultTTL = 10 * time.Second
)

// Options tune one acquisition. A nil *Options or a zero field means the
// documented default. Each backend documents what TTL means for it: a key
// expiry (redis, redlock), a lease duration observed by waiters (dynamodb),
// an etcd lease TTL in whole seconds, a ZooKeeper session timeout, or the
// PostgreSQL session's idle_session_timeout (postgres).
type Options struct {
	// TTL is the lease validity. Zero means DefaultTTL; negative is
	// ErrInvalidOptions.
	TTL time.Duration
	// AutoExtend, if true, starts a goroutine that extends the lease every
	// TTL/3 until it is released or lost. Off by default: no hidden
	// watchdog.
	AutoExtend bool
}
