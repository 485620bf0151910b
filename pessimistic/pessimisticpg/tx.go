package pessimisticpg

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

const (
	setLockTimeout = "SELECT set_config('lock_timeout', $1, true)"
	getLockTimeout = "SELECT current_setting('lock_timeout')"
)

// InTx runs fn in a PostgreSQL transaction and commits it if fn returns
// nil. It rolls back if fn returns an error or panics (the panic is
// re-raised after the rollback).
//
// On a pool or connection (*pgxpool.Pool, *pgxpool.Conn, *pgx.Conn) InTx
// begins and owns the transaction, and runs the whole transaction again
// while the error is retryable under opts — by default deadlock victims,
// serialization failures and optimistic.ErrConflict, so a closure doing
// several optimistic compare-and-swap writes is retried as one unit — so
// fn may run several times and must not have effects outside the
// transaction that cannot be repeated. Retries go through retry.Do and are
// reported to the observe hooks on ctx.
//
// On a pgx.Tx the caller already opened, InTx runs fn once inside a
// savepoint (pgx's tx.Begin): released when fn returns nil, rolled back
// when it fails or panics, so the caller's transaction stays usable. It
// never retries and never commits: the caller's own loop (an outer InTx)
// owns both, and receives fn's error (ErrConflict, ErrDeadlock, …)
// unchanged so that it can retry. opts.LockTimeout then applies to fn only
// and the previous lock_timeout is restored; opts.Isolation must be zero.
//
// Errors: concurkit.ErrInvalidArgument (nil db or fn, bad opts, Isolation
// on a pgx.Tx or on a Beginner without BeginTx); the error of fn or COMMIT
// mapped to ErrDeadlock, ErrSerialization, ErrLockNotAvailable (55P03
// without a lock timeout) or ErrLockTimeout (55P03 with opts.LockTimeout);
// *concurkit.AmbiguousCommitError (matching concurkit.ErrOutcomeUnknown)
// when COMMIT was sent and its outcome is unknown, never retried;
// *retry.ExhaustedError when retries ran out (it unwraps to the last
// error); and ctx.Err() joined with the last error when ctx ends.
func InTx(ctx context.Context, db Beginner, opts *pessimistic.Options, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := txn.Args(pkg, db, fn); err != nil {
		return err
	}
	o, err := txn.Resolve(pkg, opts)
	if err != nil {
		return err
	}
	lockTimeout := o.LockTimeout > 0
	mapErr := func(ctx context.Context, err error) error { return mapError(ctx, err, txn.UnknownWait, lockTimeout) }
	if outer, ok := db.(pgx.Tx); ok {
		if o.Isolation != sql.LevelDefault {
			return invalid("Isolation %v in a transaction the caller opened: its level is already set", o.Isolation)
		}
		begin := func(ctx context.Context) (*savepoint, error) { return beginSavepoint(ctx, outer, o) }
		return mapErr(ctx, txn.Once(ctx, begin, func(ctx context.Context, sp *savepoint) error { return fn(ctx, sp.Tx) }))
	}
	txo := pgx.TxOptions{}
	switch o.Isolation {
	case sql.LevelReadUncommitted:
		txo.IsoLevel = pgx.ReadUncommitted
	case sql.LevelReadCommitted:
		txo.IsoLevel = pgx.ReadCommitted
	case sql.LevelRepeatableRead:
		txo.IsoLevel = pgx.RepeatableRead
	case sql.LevelSerializable:
		txo.IsoLevel = pgx.Serializable
	}
	start := db.Begin
	if tb, ok := db.(pgxdb.TxBeginner); ok {
		start = func(ctx context.Context) (pgx.Tx, error) { return tb.BeginTx(ctx, txo) }
	} else if txo != (pgx.TxOptions{}) {
		return invalid("Isolation needs a handle with BeginTx, %T has only Begin", db)
	}
	begin := func(ctx context.Context) (pgTx, error) {
		tx, err := start(ctx)
		if err != nil {
			return pgTx{}, err
		}
		if lockTimeout {
			if _, err := tx.Exec(ctx, setLockTimeout, interval(o.LockTimeout)); err != nil {
				rctx, cancel := txn.CleanupContext(ctx)
				defer cancel()
				_ = tx.Rollback(rctx)
				return pgTx{}, err
			}
		}
		return pgTx{tx}, nil
	}
	return txn.Run(ctx, o, begin, func(ctx context.Context, t pgTx) error { return fn(ctx, t.Tx) }, mapErr)
}

// InTxValue is InTx for a closure that returns a value: it returns fn's
// value from the attempt that committed (or, in a caller's transaction,
// from the one run), and the zero T with any error. Everything else,
// retries and errors included, is InTx's.
func InTxValue[T any](ctx context.Context, db Beginner, opts *pessimistic.Options, fn func(ctx context.Context, tx pgx.Tx) (T, error)) (T, error) {
	var out, zero T
	if fn == nil {
		return zero, invalid("nil function")
	}
	err := InTx(ctx, db, opts, func(ctx context.Context, tx pgx.Tx) error {
		v, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		out = v
		return nil
	})
	if err != nil {
		return zero, err
	}
	return out, nil
}

// pgTx adapts pgx.Tx to the core loop.
type pgTx struct{ pgx.Tx }

var _ txn.Tx = pgTx{}

func (t pgTx) Rollback(ctx context.Context) { _ = t.Tx.Rollback(ctx) }

// End has nothing to do: lock_timeout is set with SET LOCAL semantics and
// ends with the transaction.
func (pgTx) End(context.Context) {}

func (pgTx) CommitError(_ context.Context, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr), errors.Is(err, pgx.ErrTxCommitRollback), pgconn.SafeToRetry(err):
		// The server answered, or COMMIT was never sent: not committed.
		return err
	}
	return &concurkit.AmbiguousCommitError{Err: err}
}

// savepoint is a pseudo-nested transaction in a caller's pgx.Tx: Commit
// releases it, Rollback rolls back to it. With a LockTimeout it sets
// lock_timeout after the savepoint (so rolling back to it undoes the
// setting) and restores the previous value before the release.
type savepoint struct {
	pgx.Tx
	restore string // previous lock_timeout, or "" when not changed
}

var _ txn.Tx = (*savepoint)(nil)

func beginSavepoint(ctx context.Context, outer pgx.Tx, o pessimistic.Options) (*savepoint, error) {
	var old string
	if o.LockTimeout > 0 {
		if err := outer.QueryRow(ctx, getLockTimeout).Scan(&old); err != nil {
			return nil, err
		}
	}
	tx, err := outer.Begin(ctx)
	if err != nil {
		return nil, err
	}
	sp := &savepoint{Tx: tx, restore: old}
	if o.LockTimeout > 0 {
		if _, err := tx.Exec(ctx, setLockTimeout, interval(o.LockTimeout)); err != nil {
			rctx, cancel := txn.CleanupContext(ctx)
			defer cancel()
			_ = tx.Rollback(rctx)
			return nil, err
		}
	}
	return sp, nil
}

func (s *savepoint) Commit(ctx context.Context) error {
	if s.restore != "" {
		if _, err := s.Exec(ctx, setLockTimeout, s.restore); err != nil {
			return err
		}
	}
	return s.Tx.Commit(ctx)
}

func (s *savepoint) Rollback(ctx context.Context) { _ = s.Tx.Rollback(ctx) }

func (*savepoint) End(context.Context) {}

// CommitError: releasing a savepoint commits nothing (the caller's COMMIT
// does), so its failure is never ambiguous.
func (*savepoint) CommitError(_ context.Context, err error) error { return err }
