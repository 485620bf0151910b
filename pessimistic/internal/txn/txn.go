package txn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/retry"
)

// Invalid returns an error matching concurkit.ErrInvalidArgument whose
// message is "<pkg>: invalid argument: <format, args>". %w in format wraps.
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{concurkit.InvalidArgumentError(pkg + ": invalid argument")}, args...)...)
}

// UnknownWait marks errors of statements whose wait policy the adapter
// does not know (the caller's own statements inside InTx).
const UnknownWait pessimistic.WaitPolicy = 255

// Mapped reports whether err already carries one of pessimistic's lock
// sentinels, so that mapping it again changes nothing.
func Mapped(err error) bool {
	return errors.Is(err, pessimistic.ErrLockNotAvailable) || errors.Is(err, pessimistic.ErrLockTimeout) ||
		errors.Is(err, pessimistic.ErrDeadlock) || errors.Is(err, pessimistic.ErrSerialization)
}

// Map maps err, a driver error of class c (computed by the adapter, which
// knows its driver's codes and resolves its dialect's ambiguities — e.g.
// PostgreSQL's 55P03 is a lock timeout unless the statement used NOWAIT,
// MariaDB's 1205 is NOWAIT when the statement used it), to pessimistic's
// sentinels, keeping the driver error in the chain.
//
// An error caused by the caller's context ending (ctx is done and the
// driver reports a cancelled or broken statement: class Unknown or
// QueryCanceled) is cancellation, whatever the statement was waiting for:
// it is returned matching ctx.Err() (joined with it when the driver error
// does not already match it), and never ErrLockTimeout, which is kept for
// the server's own timeouts. nil, already mapped errors and errors of
// other classes are returned unchanged.
func Map(ctx context.Context, err error, c sqlerr.Class) error {
	if err == nil || Mapped(err) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil && (c == sqlerr.Unknown || c == sqlerr.QueryCanceled) {
		if errors.Is(err, cerr) {
			return err
		}
		return errors.Join(cerr, err)
	}
	switch c {
	case sqlerr.Deadlock:
		return wrap(pessimistic.ErrDeadlock, err)
	case sqlerr.Serialization:
		return wrap(pessimistic.ErrSerialization, err)
	case sqlerr.LockNotAvailable:
		return wrap(pessimistic.ErrLockNotAvailable, err)
	case sqlerr.LockTimeout:
		return wrap(pessimistic.ErrLockTimeout, err)
	}
	return err
}

func wrap(sentinel, err error) error { return fmt.Errorf("%w: %w", sentinel, err) }

// Resolve validates opts for the adapter pkg and returns the options the
// loop runs with: defaults filled in, and Retry.Retryable wrapped so that
// ambiguous commits and context errors are never retried and, with
// RetryLockNotAvailable, ErrLockNotAvailable is. The caller's struct is not
// modified.
func Resolve(pkg string, opts *pessimistic.Options) (pessimistic.Options, error) {
	var v pessimistic.Options
	if opts != nil {
		v = *opts
	}
	if v.LockTimeout < 0 {
		return v, Invalid(pkg, "negative LockTimeout %v", v.LockTimeout)
	}
	switch v.Isolation {
	case sql.LevelDefault, sql.LevelReadUncommitted, sql.LevelReadCommitted,
		sql.LevelRepeatableRead, sql.LevelSerializable:
	default:
		return v, Invalid(pkg, "unsupported isolation level %v", v.Isolation)
	}
	if err := v.Retry.Validate(); err != nil {
		return v, Invalid(pkg, "%w", err)
	}
	base := v.Retry.Retryable
	if base == nil {
		base = retry.IsRetryable
	}
	lockNA := v.RetryLockNotAvailable
	v.Retry.Retryable = func(err error) bool {
		switch {
		case errors.Is(err, concurkit.ErrOutcomeUnknown),
			errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return false
		case lockNA && errors.Is(err, pessimistic.ErrLockNotAvailable):
			return true
		}
		return base(err)
	}
	return v, nil
}

// Args validates what every InTx shares: a nil (or typed nil) database
// handle or function is bad input.
func Args(pkg string, db, fn any) error {
	if handle.IsNil(db) {
		return Invalid(pkg, "nil database handle")
	}
	if handle.IsNil(fn) {
		return Invalid(pkg, "nil function")
	}
	return nil
}

// rollbackTimeout bounds the ROLLBACK sent after a failed attempt; it runs
// on a context detached from the caller's, which may already be cancelled.
const rollbackTimeout = 5 * time.Second

// Tx is what the loop needs from a driver's transaction (or savepoint).
type Tx interface {
	Commit(ctx context.Context) error
	// Rollback rolls back; it is a no-op after COMMIT was sent.
	Rollback(ctx context.Context)
	// End runs once after COMMIT or ROLLBACK, whatever their outcome (and
	// after a panic in fn): it restores session settings and gives back a
	// connection the adapter took for the transaction. ctx may be
	// cancelled; End bounds its own cleanup.
	End(ctx context.Context)
	// CommitError turns a COMMIT error into the error to return: a definite
	// failure, or a *concurkit.AmbiguousCommitError when COMMIT may have
	// been applied.
	CommitError(ctx context.Context, err error) error
}

// Run is the retry loop shared by the adapters: each attempt begins a
// transaction, runs fn and commits; the attempt's error goes through
// mapErr (the adapter's mapping) and is retried under o.Retry through
// retry.Do, whose observe events (package "retry") therefore cover
// transaction retries too.
func Run[T Tx](ctx context.Context, o pessimistic.Options, begin func(context.Context) (T, error), fn func(context.Context, T) error, mapErr func(context.Context, error) error) error {
	return retry.Do(ctx, o.Retry, func(ctx context.Context) error {
		return mapErr(ctx, Once(ctx, begin, fn))
	})
}

// CleanupContext returns a context for cleanup after ctx may have ended:
// not cancelled by ctx, bounded by 5 s.
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
}

// Once runs one transaction: begin, fn, commit. An error of fn rolls back;
// a panic in fn rolls back and is re-raised. Errors are not mapped.
func Once[T Tx](ctx context.Context, begin func(context.Context) (T, error), fn func(context.Context, T) error) (err error) {
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: after COMMIT or ROLLBACK.
	defer tx.End(ctx)
	done := false
	defer func() {
		if done {
			return
		}
		rctx, cancel := CleanupContext(ctx)
		defer cancel()
		tx.Rollback(rctx)
		// recover() returns nil when nothing panicked; re-raise otherwise.
		if p := recover(); p != nil {
			panic(p)
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	done = true
	if err := tx.Commit(ctx); err != nil {
		rctx, cancel := CleanupContext(ctx)
		defer cancel()
		tx.Rollback(rctx) // no-op unless COMMIT was never sent
		return tx.CommitError(ctx, err)
	}
	return nil
}

// Rows validates what both LockRows share: the handle, the lock, the table
// and column (validated and quoted with the dialect's quote), and returns
// the quoted names. Errors match concurkit.ErrInvalidArgument.
func Rows(pkg string, tx any, table, column string, lock pessimistic.Lock, quote func(parts ...string) (string, error)) (t, c string, err error) {
	if handle.IsNil(tx) {
		return "", "", Invalid(pkg, "nil transaction")
	}
	if err := lock.Validate(); err != nil {
		return "", "", err
	}
	if t, err = quote(table); err != nil {
		return "", "", Invalid(pkg, "table: %w", err)
	}
	if c, err = quote(column); err != nil {
		return "", "", Invalid(pkg, "column: %w", err)
	}
	return t, c, nil
}

// Claim holds the quoted identifiers and the values of a claim statement.
type Claim struct {
	Table, ID, Payload, State, By, At string
	Pending, Claimed, Worker          string
}

// BuildClaim resolves o's defaults, checks n and the states, and quotes
// table and the columns with quote. Errors match
// concurkit.ErrInvalidArgument.
func BuildClaim(pkg, table string, n int, o *pessimistic.ClaimOptions, quote func(...string) (string, error)) (Claim, error) {
	var v pessimistic.ClaimOptions
	if o != nil {
		v = *o
	}
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&v.IDColumn, "id")
	def(&v.PayloadColumn, "payload")
	def(&v.StateColumn, "state")
	def(&v.ClaimedByColumn, "claimed_by")
	def(&v.ClaimedAtColumn, "claimed_at")
	def(&v.Pending, "pending")
	def(&v.Claimed, "claimed")
	if n <= 0 {
		return Claim{}, Invalid(pkg, "claim n = %d, want > 0", n)
	}
	if v.Pending == v.Claimed {
		return Claim{}, Invalid(pkg, "pending and claimed states are both %q", v.Pending)
	}
	c := Claim{Pending: v.Pending, Claimed: v.Claimed, Worker: v.Worker}
	for _, f := range []struct {
		dst  *string
		name string
		what string
	}{
		{&c.Table, table, "table"},
		{&c.ID, v.IDColumn, "id column"},
		{&c.Payload, v.PayloadColumn, "payload column"},
		{&c.State, v.StateColumn, "state column"},
		{&c.By, v.ClaimedByColumn, "claimed-by column"},
		{&c.At, v.ClaimedAtColumn, "claimed-at column"},
	} {
		q, err := quote(f.name)
		if err != nil {
			return Claim{}, Invalid(pkg, "%s: %w", f.what, err)
		}
		*f.dst = q
	}
	return c, nil
}

// CeilUnits returns d in units of unit, rounded up, at least 1 and at most
// limit: a positive duration never becomes 0 (which servers read as "no
// timeout" or NOWAIT) and never overflows (d + unit - 1 would, for d near
// math.MaxInt64). d must be positive.
func CeilUnits(d, unit time.Duration, limit int64) int64 {
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return min(max(n, 1), limit)
}

// LockWait reports a lock statement on table that ended in err after
// starting at start to the observe hooks on ctx, when it failed by the
// server's lock timeout, by NOWAIT (ErrLockNotAvailable) or by the end of
// ctx. Successful statements and other failures are not reported. Without
// hooks it costs a few comparisons and allocates nothing.
func LockWait(ctx context.Context, pkg, table string, start time.Time, err error) {
	if err == nil {
		return
	}
	h := observe.FromContext(ctx)
	if h == nil || h.LockWait == nil || !lockWaitEnded(ctx, err) {
		return
	}
	h.OnLockWait(ctx, observe.LockWaitEvent{Package: pkg, Key: table, Wait: time.Since(start), Attempts: 1, Err: err})
}

// AdvisoryWait is LockWait for an advisory lock: the event's Key is the
// decimal key.
func AdvisoryWait(ctx context.Context, pkg string, key int64, start time.Time, err error) {
	if err == nil {
		return
	}
	h := observe.FromContext(ctx)
	if h == nil || h.LockWait == nil || !lockWaitEnded(ctx, err) {
		return
	}
	h.OnLockWait(ctx, observe.LockWaitEvent{Package: pkg, Key: strconv.FormatInt(key, 10), Wait: time.Since(start), Attempts: 1, Err: err})
}

func lockWaitEnded(ctx context.Context, err error) bool {
	if errors.Is(err, pessimistic.ErrLockTimeout) || errors.Is(err, pessimistic.ErrLockNotAvailable) {
		return true
	}
	cerr := ctx.Err()
	return cerr != nil && errors.Is(err, cerr)
}
