package pessimisticmysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

// maxPlaceholders is the MySQL protocol's limit of bind parameters per
// statement.
const maxPlaceholders = 65535

const lockRows = "SELECT %[2]s FROM %[1]s WHERE %[2]s IN (%[3]s) ORDER BY %[2]s%[4]s"

// LockRows locks the rows of table whose column equals one of keys, in
// ascending key order (so that two callers locking overlapping sets cannot
// deadlock on them), and returns the keys of the rows it locked, sorted
// and distinct. ForNoKeyUpdate is taken as FOR UPDATE, ForShare as LOCK IN
// SHARE MODE, WaitTimeout as WAIT n (MariaDB; whole seconds, rounded up).
// Empty keys lock nothing and return (nil, nil); more than 65535 keys is
// bad input. tx should be a *sql.Tx: the locks last until it ends; under
// WaitTimeout it must be one (as in pessimisticpg, where a bounded wait
// needs a transaction: outside one the lock would end with the statement).
//
// Under REPEATABLE READ (MariaDB's default) the lock does not refresh the
// transaction's snapshot: a plain SELECT after LockRows reads the
// snapshot taken at the transaction's first consistent read, so if any
// plain read ran before the lock, the values read after it may be stale
// and writing them back loses updates (MariaDB ≥ 11.6 fails the lock with
// 1020 → ErrSerialization instead). Lock before any other read in the
// transaction, read the values with a locking read (Clause on your own
// SELECT), or use READ COMMITTED. PostgreSQL has no such gap: there,
// locking a row changed after the snapshot is ErrSerialization.
//
// A lock statement that fails by the server's lock timeout, by NOWAIT or
// by the end of ctx is reported to the observe hooks on ctx
// (Hooks.LockWait: Package "pessimisticmysql", Key the table name, Wait
// the statement's duration, Err).
//
// Errors: concurkit.ErrInvalidArgument (nil tx, bad identifier, invalid
// lock, too many keys, WaitTimeout outside a *sql.Tx);
// ErrLockNotAvailable (NoWait and a row is locked: MariaDB 1205, MySQL
// 3572); ErrLockTimeout (1205 under Wait or WaitTimeout); ErrDeadlock;
// ErrSerialization (MariaDB 1020); each wrapping the driver error; an
// error matching ctx.Err() (and not ErrLockTimeout) when ctx ends during
// the wait.
func LockRows[K pessimistic.Key](ctx context.Context, tx DBTX, table, column string, keys []K, lock pessimistic.Lock) ([]K, error) {
	t, c, err := txn.Rows(pkg, tx, table, column, lock, ident.MySQL)
	if err != nil {
		return nil, err
	}
	if _, ok := tx.(*sql.Tx); lock.Wait == pessimistic.WaitTimeout && !ok {
		return nil, invalid("WaitTimeout needs a *sql.Tx, got %T", tx)
	}
	clause, err := Clause(lock)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > maxPlaceholders {
		return nil, invalid("%d keys, at most %d per call", len(keys), maxPlaceholders)
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	q := fmt.Sprintf(lockRows, t, c, placeholders(len(keys)), clause)
	start := time.Now()
	got, err := queryColumn[K](ctx, tx, q, args...)
	if err != nil {
		err = MapError(ctx, lock, err)
		txn.LockWait(ctx, pkg, table, start, err)
		return nil, err
	}
	return got, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// queryColumn returns the distinct adjacent values of a one-column query.
func queryColumn[K pessimistic.Key](ctx context.Context, tx DBTX, q string, args ...any) ([]K, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []K
	for rows.Next() {
		var k K
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
	return out, rows.Err()
}
