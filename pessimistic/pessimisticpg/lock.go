package pessimisticpg

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

const lockRows = "SELECT %[2]s FROM %[1]s WHERE %[2]s = ANY($1) ORDER BY %[2]s%[3]s"

// LockRows locks the rows of table whose column equals one of keys, in
// ascending key order (so that two callers locking overlapping sets cannot
// deadlock on them), and returns the keys of the rows it locked, sorted and
// distinct. Keys with no row are missing from the result, and so are rows
// skipped under SkipLocked. Empty keys lock nothing and return (nil, nil).
//
// table and column are single unqualified identifiers (the search_path
// decides the schema); they are validated and quoted, keys are bound. tx
// should be a transaction: the locks last until it ends. Under WaitTimeout
// tx must be a pgx.Tx: lock_timeout is set for this statement only (SET
// LOCAL semantics, restored afterwards), which has no effect outside a
// transaction and would leave the wait unbounded.
//
// A lock statement that fails by the server's lock timeout, by NOWAIT or
// by the end of ctx is reported to the observe hooks on ctx
// (Hooks.LockWait: Package "pessimisticpg", Key the table name, Wait the
// statement's duration, Err).
//
// Errors: concurkit.ErrInvalidArgument (nil tx, bad identifier, invalid
// lock, WaitTimeout outside a pgx.Tx); ErrLockNotAvailable (NoWait and a
// row is locked); ErrLockTimeout (WaitTimeout or the transaction's
// lock_timeout expired); ErrDeadlock; ErrSerialization; each wrapping the
// driver error; an error matching ctx.Err() (and not ErrLockTimeout) when
// ctx ends during the wait.
func LockRows[K pessimistic.Key](ctx context.Context, tx DBTX, table, column string, keys []K, lock pessimistic.Lock) ([]K, error) {
	t, c, err := txn.Rows(pkg, tx, table, column, lock, ident.Postgres)
	if err != nil {
		return nil, err
	}
	if _, ok := tx.(pgx.Tx); lock.Wait == pessimistic.WaitTimeout && !ok {
		return nil, invalid("WaitTimeout needs a pgx.Tx: lock_timeout is transaction-scoped and would not bound the wait on a %T", tx)
	}
	clause, err := Clause(lock)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	q := fmt.Sprintf(lockRows, t, c, clause)
	var got []K
	start := time.Now()
	err = withLockTimeout(ctx, tx, lock, func() error {
		rows, err := tx.Query(ctx, q, keys)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, pgx.RowTo[K])
		return err
	})
	if err != nil {
		err = MapError(ctx, lock, err)
		txn.LockWait(ctx, pkg, table, start, err)
		return nil, err
	}
	return slices.Compact(got), nil
}

// withLockTimeout runs f with lock_timeout set to lock.Timeout when the
// policy is WaitTimeout, restoring the previous value afterwards.
func withLockTimeout(ctx context.Context, tx DBTX, lock pessimistic.Lock, f func() error) error {
	if lock.Wait != pessimistic.WaitTimeout {
		return f()
	}
	var old string
	if err := tx.QueryRow(ctx, getLockTimeout).Scan(&old); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, setLockTimeout, interval(lock.Timeout)); err != nil {
		return err
	}
	if err := f(); err != nil {
		return err // the transaction is aborted; its end resets lock_timeout
	}
	_, err := tx.Exec(ctx, setLockTimeout, old)
	return err
}
