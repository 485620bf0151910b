package pessimisticmysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

// The claim is two statements (MariaDB has no UPDATE … RETURNING): the
// locking SELECT picks the jobs, the UPDATE marks exactly those. Only the
// row locks, held until the transaction ends, keep another worker from
// picking the same jobs in between.
const (
	claimSelect = "SELECT %[2]s, %[3]s FROM %[1]s WHERE %[4]s = ? ORDER BY %[2]s LIMIT ? FOR UPDATE SKIP LOCKED"
	claimUpdate = "UPDATE %[1]s SET %[3]s = ?, %[4]s = ?, %[5]s = NOW(6) WHERE %[2]s IN (%[6]s)"
)

// claimNames checks and quotes the names and values of a claim.
func claimNames(table string, n int, opts *pessimistic.ClaimOptions) (txn.Claim, error) {
	return txn.BuildClaim(pkg, table, n, opts, ident.MySQL)
}

// selectStatement is the claim's locking SELECT.
func selectStatement(c txn.Claim) string {
	return fmt.Sprintf(claimSelect, c.Table, c.ID, c.Payload, c.State)
}

// updateStatement is the claim's UPDATE of k jobs.
func updateStatement(c txn.Claim, k int) string {
	return fmt.Sprintf(claimUpdate, c.Table, c.ID, c.State, c.By, c.At, placeholders(k))
}

// ClaimJobs claims up to n pending jobs of table for a worker, the
// queue-worker pattern: in tx it selects up to n pending jobs in id order
// FOR UPDATE SKIP LOCKED, then marks them claimed (state, worker, NOW(6))
// with a second statement, and returns them in id order. Concurrent
// workers get disjoint jobs; fewer than n (or none) when fewer are free.
// The claim is made durable by committing tx.
//
// tx must be a *sql.Tx: outside a transaction each statement commits on
// its own, the SELECT's locks end before the UPDATE runs, and two workers
// could claim the same job.
//
// Errors: concurkit.ErrInvalidArgument (nil tx, tx not a *sql.Tx, n <= 0,
// bad identifier, pending == claimed); ErrDeadlock; ctx errors; each
// wrapping the driver error.
func ClaimJobs(ctx context.Context, tx DBTX, table string, n int, opts *pessimistic.ClaimOptions) ([]pessimistic.Job, error) {
	if handle.IsNil(tx) {
		return nil, invalid("nil transaction")
	}
	if _, ok := tx.(*sql.Tx); !ok {
		return nil, invalid("ClaimJobs needs a *sql.Tx (its SELECT … FOR UPDATE and UPDATE must share one transaction), got %T", tx)
	}
	c, err := claimNames(table, n, opts)
	if err != nil {
		return nil, err
	}
	n = min(n, maxPlaceholders-2)
	jobs, err := selectJobs(ctx, tx, selectStatement(c), c.Pending, n)
	if err != nil || len(jobs) == 0 {
		return nil, mapError(ctx, err, pessimistic.SkipLocked)
	}
	args := make([]any, 0, 2+len(jobs))
	args = append(args, c.Claimed, c.Worker)
	for _, j := range jobs {
		args = append(args, j.ID)
	}
	if _, err := tx.ExecContext(ctx, updateStatement(c, len(jobs)), args...); err != nil {
		return nil, mapError(ctx, err, pessimistic.SkipLocked)
	}
	return jobs, nil
}

func selectJobs(ctx context.Context, tx DBTX, q, pending string, n int) ([]pessimistic.Job, error) {
	rows, err := tx.QueryContext(ctx, q, pending, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []pessimistic.Job
	for rows.Next() {
		var j pessimistic.Job
		if err := rows.Scan(&j.ID, &j.Payload); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}
