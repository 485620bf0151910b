package pessimistic

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
)

// DBTX is the pgx v5 query interface (the shape of sqlc's DBTX):
// *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx all satisfy it. Row
// locks last until the end of the transaction, so the lock helpers are meant
// to be given a pgx.Tx (the one InTx passes to its closure).
type DBTX = pgxdb.DBTX

// Beginner starts pgx transactions: *pgxpool.Pool, *pgxpool.Conn and
// *pgx.Conn satisfy it.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

var (
	_ Beginner = (*pgxpool.Pool)(nil)
	_ Beginner = (*pgxpool.Conn)(nil)
	_ Beginner = (*pgx.Conn)(nil)
)

const pgSetLockTimeout = "SELECT set_config('lock_timeout', $1, true)"

// InTx runs fn in a PostgreSQL transaction begun on db and commits it if fn
// returns nil. It rolls back if fn returns an error or panics (the panic is
// re-raised after the rollback). The whole transaction is run again while
// the error is retryable under opts (by default: deadlock victims and
// serialization failures), so fn may run several times and must not have
// effects outside the transaction that cannot be repeated.
//
// Errors: ErrInvalidArgument (nil db or fn, bad opts), the error of fn or
// COMMIT mapped to ErrDeadlock, ErrSerialization, ErrLockNotAvailable (55P03
// without a lock timeout) or ErrLockTimeout (55P03 with opts.LockTimeout);
// *AmbiguousCommitError when COMMIT was sent and its outcome is unknown;
// *retry.ExhaustedError when retries ran out (it unwraps to the last error);
// and ctx.Err() joined with the last error when ctx ends.
func InTx(ctx context.Context, db Beginner, opts *Options, fn func(ctx context.Context, tx pgx.Tx) error) error {
	o, err := txArgs(db, fn, opts)
	if err != nil {
		return err
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
	begin := func(ctx context.Context) (pgTx, error) {
		tx, err := db.BeginTx(ctx, txo)
		if err != nil {
			return pgTx{}, err
		}
		if o.LockTimeout > 0 {
			if _, err := tx.Exec(ctx, pgSetLockTimeout, pgInterval(o.LockTimeout)); err != nil {
				rctx, cancel := cleanupContext(ctx)
				defer cancel()
				_ = tx.Rollback(rctx)
				return pgTx{}, err
			}
		}
		return pgTx{tx}, nil
	}
	return inTx(ctx, o, begin, func(ctx context.Context, t pgTx) error { return fn(ctx, t.Tx) })
}

// pgTx adapts pgx.Tx to the core loop.
type pgTx struct{ pgx.Tx }

func (t pgTx) commit(ctx context.Context) error { return t.Commit(ctx) }
func (t pgTx) rollback(ctx context.Context)     { _ = t.Rollback(ctx) }

// end has nothing to do: lock_timeout is set with SET LOCAL semantics and
// ends with the transaction.
func (pgTx) end(context.Context) {}
func (pgTx) commitError(_ context.Context, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr), errors.Is(err, pgx.ErrTxCommitRollback), pgconn.SafeToRetry(err):
		// The server answered, or COMMIT was never sent: not committed.
		return err
	}
	return &AmbiguousCommitError{Err: err}
}

var _ txn = pgTx{}

// Key is the type of row keys LockRows accepts.
type Key interface {
	~int | ~int32 | ~int64 | ~string
}

const pgLockRows = "SELECT %[2]s FROM %[1]s WHERE %[2]s = ANY($1) ORDER BY %[2]s%[3]s"

// LockRows locks the rows of table whose column equals one of keys, in
// ascending key order (so that two callers locking overlapping sets cannot
// deadlock on them), and returns the keys of the rows it locked, sorted and
// distinct. Keys with no row are missing from the result, and so are rows
// skipped under SkipLocked. Empty keys lock nothing and return (nil, nil).
//
// table and column are single unqualified identifiers (the search_path
// decides the schema); they are validated and quoted, keys are bound. tx
// should be a transaction: the locks last until it ends. Under WaitTimeout
// lock_timeout is set for this statement only and then restored.
//
// Errors: ErrInvalidArgument (nil tx, bad identifier, invalid lock);
// ErrLockNotAvailable (NoWait and a row is locked); ErrLockTimeout
// (WaitTimeout or the transaction's lock_timeout expired); ErrDeadlock;
// ErrSerialization; each wrapping the driver error; an error matching
// ctx.Err() (and not ErrLockTimeout) when ctx ends during the wait.
func LockRows[K Key](ctx context.Context, tx DBTX, table, column string, keys []K, lock Lock) ([]K, error) {
	t, c, clause, err := rowsTarget(tx, table, column, ident.Postgres, lock.Postgres)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	q := fmt.Sprintf(pgLockRows, t, c, clause)
	var got []K
	err = withPGLockTimeout(ctx, tx, lock, func() error {
		rows, err := tx.Query(ctx, q, keys)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, pgx.RowTo[K])
		return err
	})
	if err != nil {
		return nil, lock.MapError(ctx, err)
	}
	return slices.Compact(got), nil
}

const pgGetLockTimeout = "SELECT current_setting('lock_timeout')"

// withPGLockTimeout runs f with lock_timeout set to lock.Timeout when the
// policy is WaitTimeout, restoring the previous value afterwards.
func withPGLockTimeout(ctx context.Context, tx DBTX, lock Lock, f func() error) error {
	if lock.Wait != WaitTimeout {
		return f()
	}
	var old string
	if err := tx.QueryRow(ctx, pgGetLockTimeout).Scan(&old); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, pgSetLockTimeout, pgInterval(lock.Timeout)); err != nil {
		return err
	}
	if err := f(); err != nil {
		return err // the transaction is aborted; its end resets lock_timeout
	}
	_, err := tx.Exec(ctx, pgSetLockTimeout, old)
	return err
}

// pgClaim: the locking subquery is a MATERIALIZED CTE so that it runs once;
// SKIP LOCKED makes concurrent workers take disjoint rows, and the state is
// re-checked on the locked row version, so a job is claimed exactly once.
const pgClaim = `WITH c AS MATERIALIZED (
	SELECT %[2]s FROM %[1]s WHERE %[4]s = $1 ORDER BY %[2]s LIMIT $2 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s AS j SET %[4]s = $3, %[5]s = $4, %[6]s = now()
FROM c WHERE j.%[2]s = c.%[2]s
RETURNING j.%[2]s, j.%[3]s`

// ClaimJobs claims up to n pending jobs of table for a worker, the
// queue-worker pattern: it locks the lowest-id pending rows that no other
// transaction has locked (FOR UPDATE SKIP LOCKED), sets them to the claimed
// state with the worker's name and the current time, and returns them in id
// order, in one statement. Concurrent workers get disjoint jobs; fewer than
// n (or none) when fewer are free. The claim is made durable by committing
// tx; if tx rolls back the jobs are pending again.
//
// Errors: ErrInvalidArgument (nil tx, n <= 0, bad identifier, pending ==
// claimed); ErrDeadlock / ErrSerialization (under REPEATABLE READ or
// SERIALIZABLE a concurrently claimed row is a serialization failure);
// ctx errors; each wrapping the driver error.
func ClaimJobs(ctx context.Context, tx DBTX, table string, n int, opts *ClaimOptions) ([]Job, error) {
	if handle.IsNil(tx) {
		return nil, invalid("nil transaction")
	}
	c, err := opts.build(table, n, ident.Postgres)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf(pgClaim, c.table, c.id, c.payload, c.state, c.by, c.at)
	rows, err := tx.Query(ctx, q, c.pending, n, c.claimed, c.worker)
	if err != nil {
		return nil, mapError(ctx, err, SkipLocked, false)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) {
		var j Job
		err := r.Scan(&j.ID, &j.Payload)
		return j, err
	})
	if err != nil {
		return nil, mapError(ctx, err, SkipLocked, false)
	}
	slices.SortFunc(jobs, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
	return jobs, nil
}
