package observe

import (
	"context"
	"errors"
	"time"
)

// Hooks are callbacks for the events concurkit reports. Any field may be
// nil: that event is not reported. Callbacks run synchronously on the
// goroutine that caused the event (a lease's background goroutine for
// auto-extension and loss), so they must be quick and must not block; they
// must be safe for concurrent use. The ctx they receive is the context of
// the operation (for lease events, the lease's own context) and is only for
// reading values such as trace ids.
type Hooks struct {
	// Retry is called when an attempt failed with a retryable error: before
	// the backoff that precedes the next attempt, or with GaveUp set when the
	// retry budget is used up.
	Retry func(ctx context.Context, e RetryEvent)
	// LockWait is called when an acquisition that could not succeed at once
	// ends: acquired after waiting or polling, timed out, or cancelled.
	LockWait func(ctx context.Context, e LockWaitEvent)
	// LeaseExtend is called after every extension attempt of a lease,
	// explicit or automatic; Err is nil on success.
	LeaseExtend func(ctx context.Context, e LeaseEvent)
	// LeaseLost is called once when a lease is lost or expires; Err is the
	// cause. It is not called for a lease its holder released.
	LeaseLost func(ctx context.Context, e LeaseEvent)
	// FenceRejected is called when storage refused a write or admission
	// because it has seen a higher fencing token.
	FenceRejected func(ctx context.Context, e FenceEvent)
	// Conflict is called when an optimistic compare-and-swap found another
	// version than the expected one.
	Conflict func(ctx context.Context, e ConflictEvent)
}

// RetryEvent describes one failed attempt of a retry loop.
type RetryEvent struct {
	// Package is the concurkit package running the loop, e.g. "retry",
	// "pessimisticpg".
	Package string
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	// Err is the attempt's error.
	Err error
	// Delay is the backoff before the next attempt; zero when GaveUp.
	Delay time.Duration
	// GaveUp is true when no further attempt follows (the budget is used up).
	GaveUp bool
}

// LockWaitEvent describes a lock acquisition that had to wait.
type LockWaitEvent struct {
	// Package is the lock's package, e.g. "redislock", "pessimisticpg".
	Package string
	// Key is the lock key (as the caller gave it). Metrics adapters must not
	// use it as an attribute: its cardinality is unbounded.
	Key string
	// Wait is the time from the first attempt to the outcome.
	Wait time.Duration
	// Attempts counts the tries for polling backends (1 for a server-side
	// wait).
	Attempts int
	// Err is nil when the lock was acquired, otherwise why not.
	Err error
}

// LeaseEvent describes an extension or the loss of a distributed lease.
type LeaseEvent struct {
	// Package is the lock backend's package, e.g. "etcdlock".
	Package string
	// Key is the lock key; see LockWaitEvent.Key.
	Key string
	// Token is the lease's fencing token.
	Token int64
	// Err is the extension's error or the loss cause.
	Err error
}

// FenceEvent describes a write refused for a stale fencing token.
type FenceEvent struct {
	// Package is the package that ran the guarded write, e.g. "fencedpg".
	Package string
	// Resource is the table (or fence resource) written; it is not the row
	// key.
	Resource string
	// Token is the refused token.
	Token int64
	// Seen is the highest token the storage has seen, or 0 if unknown.
	Seen int64
}

// ConflictEvent describes a compare-and-swap that found another version.
type ConflictEvent struct {
	// Package is the package that ran the compare-and-swap, e.g.
	// "optimisticpg".
	Package string
	// Table is the table (DynamoDB: the table name).
	Table string
}

type hooksKey struct{}

// WithHooks returns a copy of ctx that carries h. Hooks already on ctx keep
// being called: for each event, the earlier ones first, then h. A nil h
// returns ctx unchanged.
func WithHooks(ctx context.Context, h *Hooks) context.Context {
	if h == nil {
		return ctx
	}
	if old := FromContext(ctx); old != nil {
		h = compose(old, h)
	}
	return context.WithValue(ctx, hooksKey{}, h)
}

// FromContext returns the hooks installed on ctx with WithHooks, or nil.
// Packages emit events with the methods of *Hooks, which are no-ops on a
// nil receiver.
func FromContext(ctx context.Context) *Hooks {
	h, _ := ctx.Value(hooksKey{}).(*Hooks)
	return h
}

func compose(a, b *Hooks) *Hooks {
	return &Hooks{
		Retry:         both(a.Retry, b.Retry),
		LockWait:      both(a.LockWait, b.LockWait),
		LeaseExtend:   both(a.LeaseExtend, b.LeaseExtend),
		LeaseLost:     both(a.LeaseLost, b.LeaseLost),
		FenceRejected: both(a.FenceRejected, b.FenceRejected),
		Conflict:      both(a.Conflict, b.Conflict),
	}
}

func both[E any](f, g func(context.Context, E)) func(context.Context, E) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, e E) { f(ctx, e); g(ctx, e) }
}

// OnRetry reports e to h.Retry, if h and the callback are set.
func (h *Hooks) OnRetry(ctx context.Context, e RetryEvent) {
	if h != nil && h.Retry != nil {
		h.Retry(ctx, e)
	}
}

// OnLockWait reports e to h.LockWait, if h and the callback are set.
func (h *Hooks) OnLockWait(ctx context.Context, e LockWaitEvent) {
	if h != nil && h.LockWait != nil {
		h.LockWait(ctx, e)
	}
}

// OnLeaseExtend reports e to h.LeaseExtend, if h and the callback are set.
func (h *Hooks) OnLeaseExtend(ctx context.Context, e LeaseEvent) {
	if h != nil && h.LeaseExtend != nil {
		h.LeaseExtend(ctx, e)
	}
}

// OnLeaseLost reports e to h.LeaseLost, if h and the callback are set.
func (h *Hooks) OnLeaseLost(ctx context.Context, e LeaseEvent) {
	if h != nil && h.LeaseLost != nil {
		h.LeaseLost(ctx, e)
	}
}

// OnFenceRejected reports e to h.FenceRejected, if h and the callback are
// set.
func (h *Hooks) OnFenceRejected(ctx context.Context, e FenceEvent) {
	if h != nil && h.FenceRejected != nil {
		h.FenceRejected(ctx, e)
	}
}

// OnConflict reports e to h.Conflict, if h and the callback are set.
func (h *Hooks) OnConflict(ctx context.Context, e ConflictEvent) {
	if h != nil && h.Conflict != nil {
		h.Conflict(ctx, e)
	}
}

// ErrorType returns a short, low-cardinality name for err, for metric
// attributes such as OpenTelemetry's error.type: the ErrorType() of the
// first error in err's chain that has such a method (concurkit's sentinels
// do: "conflict", "deadlock", "lease_lost", ...), "canceled" or
// "deadline_exceeded" for context errors, "" for nil, and "_OTHER"
// otherwise (the OpenTelemetry convention for an unknown type).
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var t interface{ ErrorType() string }
	if errors.As(err, &t) {
		return t.ErrorType()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "_OTHER"
}
