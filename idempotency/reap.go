package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concurkit/concurkit/internal/handle"
)

// DefaultBatchSize is how many keys Reap deletes per statement.
const DefaultBatchSize = 500

// ReapOptions configure Reap. A nil *ReapOptions, and every zero field,
// means the documented default.
type ReapOptions struct {
	// BatchSize bounds the keys deleted by one statement (one
	// transaction), so that the reaper never holds many row locks or
	// writes a large transaction; default DefaultBatchSize.
	BatchSize int
	// MaxBatches bounds the statements of one call; zero means no bound
	// (Reap stops when a batch deletes fewer than BatchSize keys).
	MaxBatches int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Reap deletes the keys of s that expired (TTL after their last run),
// in batches of opts.BatchSize, until a batch finds fewer, opts.MaxBatches
// batches ran, or ctx ends; it returns how many keys it deleted. Expired
// keys are already treated as absent by a claim, so reaping only bounds
// the table's size; run it periodically (every few minutes, from one
// process or several: batches skip rows that another reaper or a claim
// holds). On DynamoDB, the table's TTL (see idempotencydynamo.CreateTable)
// deletes expired items on its own; Reap works there too, by a scan.
//
// Errors: concurkit.ErrInvalidArgument for a nil store or negative
// options; the store's error, with the count deleted so far; ctx.Err()
// joined when ctx ended the call.
func Reap(ctx context.Context, s Store, opts *ReapOptions) (int, error) {
	if handle.IsNil(s) {
		return 0, invalid("nil store")
	}
	var o ReapOptions
	if opts != nil {
		o = *opts
	}
	if o.BatchSize < 0 || o.MaxBatches < 0 {
		return 0, invalid("negative BatchSize %d or MaxBatches %d", o.BatchSize, o.MaxBatches)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	total := 0
	for batch := 0; o.MaxBatches == 0 || batch < o.MaxBatches; batch++ {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := s.Reap(ctx, o.Now(), o.BatchSize)
		total += n
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
				err = errors.Join(err, cerr)
			}
			return total, fmt.Errorf("idempotency: reap: %w", err)
		}
		if n < o.BatchSize {
			break
		}
	}
	return total, nil
}
