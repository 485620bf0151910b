package ratelimitpg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concurkit/concurkit"
)

// reapSQL deletes up to $2 rows whose state ended before $1. %[2]s is the
// quoted time column ("window_end" or "tat"). SKIP LOCKED passes over rows
// a caller is counting into right now; FOR UPDATE re-checks a row that was
// updated since the statement began, so a row that has just come back to
// life is not deleted. No index backs the scan: an index on a column every
// request updates would forbid HOT updates and cost every decision more
// than a periodic scan costs the reaper.
const reapSQL = `DELETE FROM %[1]s WHERE "key" IN (
  SELECT "key" FROM %[1]s WHERE %[2]s < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`

// Defaults of the zero ReapOptions fields.
const (
	DefaultReapBatch = 1000
	DefaultReapGrace = time.Minute
)

// ReapOptions tunes Reap. Nil or zero fields mean the documented defaults;
// negative values are bad input.
type ReapOptions struct {
	// Batch is how many rows one DELETE removes (each batch is its own
	// statement, so locks are short). Zero means DefaultReapBatch.
	Batch int
	// Grace is how long after its window ended (or its TAT passed) a row
	// is kept, so that servers whose clocks lag still find it. Zero means
	// DefaultReapGrace.
	Grace time.Duration
}

// Reap deletes the rows of the Limiter's table whose state is over: a
// fixed window that ended, a GCRA arrival time that passed, more than
// Grace ago by the Limiter's clock. Such a row admits nothing a missing
// row would not, so deleting it changes no decision. Redis needs no reaper
// (its keys expire); a PostgreSQL table grows by one row per key ever seen
// until Reap runs: call it periodically (one process is enough; several
// do not conflict).
//
// It returns the number of rows deleted, in batches until a batch comes
// back short or ctx ends. Bad options or a nil Limiter are errors matching
// concurkit.ErrInvalidArgument; driver errors are wrapped and match
// ctx.Err() when ctx ended the call (with the count deleted so far).
func (l *Limiter) Reap(ctx context.Context, opts *ReapOptions) (int64, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	var o ReapOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Batch < 0:
		return 0, fmt.Errorf("%w: %s: negative ReapOptions.Batch %d", concurkit.ErrInvalidArgument, pkg, o.Batch)
	case o.Grace < 0:
		return 0, fmt.Errorf("%w: %s: negative ReapOptions.Grace %v", concurkit.ErrInvalidArgument, pkg, o.Grace)
	}
	if o.Batch == 0 {
		o.Batch = DefaultReapBatch
	}
	if o.Grace == 0 {
		o.Grace = DefaultReapGrace
	}
	before := l.now().Add(-o.Grace)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		tag, err := l.db.Exec(ctx, l.reap, before, o.Batch)
		if err != nil {
			err = fmt.Errorf("%s: reap %s: %w", pkg, l.table, err)
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
				err = errors.Join(err, cerr)
			}
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(o.Batch) {
			return total, nil
		}
	}
}
