package pessimisticpg

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

// claimJobs: the locking subquery is a MATERIALIZED CTE so that it runs
// once; SKIP LOCKED makes concurrent workers take disjoint rows, and the
// state is re-checked on the locked row version, so a job is claimed
// exactly once.
const claimJobs = `WITH c AS MATERIALIZED (
	SELECT %[2]s FROM %[1]s WHERE %[4]s = $1 ORDER BY %[2]s LIMIT $2 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s AS j SET %[4]s = $3, %[5]s = $4, %[6]s = now()
FROM c WHERE j.%[2]s = c.%[2]s
RETURNING j.%[2]s, j.%[3]s`

// claimStatement builds the claim statement for table and opts.
func claimStatement(table string, n int, opts *pessimistic.ClaimOptions) (string, txn.Claim, error) {
	c, err := txn.BuildClaim(pkg, table, n, opts, ident.Postgres)
	if err != nil {
		return "", c, err
	}
	return fmt.Sprintf(claimJobs, c.Table, c.ID, c.Payload, c.State, c.By, c.At), c, nil
}

// ClaimJobs claims up to n pending jobs of table for a worker, the
// queue-worker pattern: it locks the lowest-id pending rows that no other
// transaction has locked (FOR UPDATE SKIP LOCKED), sets them to the claimed
// state with the worker's name and the current time, and returns them in id
// order, in one statement. Concurrent workers get disjoint jobs; fewer than
// n (or none) when fewer are free. The claim is made durable by committing
// tx; if tx rolls back the jobs are pending again. (Being one statement, it
// is also safe on a pool or connection outside a transaction: the claim
// then commits at once.)
//
// Errors: concurkit.ErrInvalidArgument (nil tx, n <= 0, bad identifier,
// pending == claimed); ErrDeadlock / ErrSerialization (under REPEATABLE
// READ or SERIALIZABLE a concurrently claimed row is a serialization
// failure); ctx errors; each wrapping the driver error.
func ClaimJobs(ctx context.Context, tx DBTX, table string, n int, opts *pessimistic.ClaimOptions) ([]pessimistic.Job, error) {
	if handle.IsNil(tx) {
		return nil, invalid("nil transaction")
	}
	q, c, err := claimStatement(table, n, opts)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, q, c.Pending, n, c.Claimed, c.Worker)
	if err != nil {
		return nil, mapError(ctx, err, pessimistic.SkipLocked, false)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pessimistic.Job, error) {
		var j pessimistic.Job
		err := r.Scan(&j.ID, &j.Payload)
		return j, err
	})
	if err != nil {
		return nil, mapError(ctx, err, pessimistic.SkipLocked, false)
	}
	slices.SortFunc(jobs, func(a, b pessimistic.Job) int { return cmp.Compare(a.ID, b.ID) })
	return jobs, nil
}
