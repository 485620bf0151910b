package pessimistic

import (
	"context"
	"time"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/retry"
)

// rollbackTimeout bounds the ROLLBACK sent after a failed attempt; it runs
// on a context detached from the caller's, which may already be cancelled.
const rollbackTimeout = 5 * time.Second

// txn is what the core loop needs from a driver's transaction.
type txn interface {
	commit(ctx context.Context) error
	rollback(ctx context.Context)
	// end runs once after COMMIT or ROLLBACK, whatever their outcome (and
	// after a panic in fn): it restores session settings and gives back a
	// connection the adapter took for the transaction. ctx may be
	// cancelled; end bounds its own cleanup.
	end(ctx context.Context)
	// commitError turns a COMMIT error into the error to return: a definite
	// failure (mapped) or an *AmbiguousCommitError.
	commitError(ctx context.Context, err error) error
}

// inTx is the retry loop shared by the drivers: each attempt begins a
// transaction, runs fn, and commits; errors are mapped to the sentinels and
// retried by the policy in o.
func inTx[T txn](ctx context.Context, o Options, begin func(context.Context) (T, error), fn func(context.Context, T) error) error {
	return retry.Do(ctx, o.Retry, func(ctx context.Context) error {
		return mapError(ctx, attempt(ctx, begin, fn), unknownWait, o.LockTimeout > 0)
	})
}

// cleanupContext returns a context for cleanup after ctx may have ended:
// not cancelled by ctx, bounded by rollbackTimeout.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
}

// attempt runs one transaction. A panic in fn rolls back and is re-raised.
func attempt[T txn](ctx context.Context, begin func(context.Context) (T, error), fn func(context.Context, T) error) (err error) {
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: after COMMIT or ROLLBACK.
	defer tx.end(ctx)
	done := false
	defer func() {
		if done {
			return
		}
		rctx, cancel := cleanupContext(ctx)
		defer cancel()
		tx.rollback(rctx)
		// recover() returns nil when nothing panicked; re-raise otherwise.
		if p := recover(); p != nil {
			panic(p)
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	done = true
	if err := tx.commit(ctx); err != nil {
		rctx, cancel := cleanupContext(ctx)
		defer cancel()
		tx.rollback(rctx) // no-op unless COMMIT was never sent
		return tx.commitError(ctx, err)
	}
	return nil
}

// txArgs validates what InTx and InTxMySQL share: a nil (or typed nil)
// database handle or function is ErrInvalidArgument; opts resolves to its
// defaults or returns its error.
func txArgs(db, fn any, opts *Options) (Options, error) {
	if handle.IsNil(db) {
		return Options{}, invalid("nil database handle")
	}
	if handle.IsNil(fn) {
		return Options{}, invalid("nil function")
	}
	return opts.value()
}
