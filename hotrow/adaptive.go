package hotrow

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/concurkit/concurkit/retry"
)

// Defaults of AdaptiveOptions.
const (
	// DefaultHotAfter: a key is hot after this many conflicts (decayed).
	DefaultHotAfter = 2
	// DefaultHalfLife: a key's conflict count halves every second.
	DefaultHalfLife = time.Second
	// DefaultSketchWidth is the counters per row of the sketch: 4 rows of
	// 4,096 four-byte counters, 64 KiB per Adaptive.
	DefaultSketchWidth = 4096
)

// AdaptiveOptions configure an Adaptive. The zero value (or nil) means the
// defaults.
type AdaptiveOptions struct {
	// HotAfter is the decayed conflict count at which a key turns hot.
	// Zero means DefaultHotAfter.
	HotAfter int
	// HalfLife is how fast a key cools: its conflict count halves every
	// HalfLife. Zero means DefaultHalfLife.
	HalfLife time.Duration
	// SketchWidth is the counters per row of the count-min sketch that
	// holds the counts (rounded up to a power of two; memory is 16 bytes
	// per unit of width whatever the number of keys). Zero means
	// DefaultSketchWidth.
	SketchWidth int
	// Retry bounds and classifies the attempts: an error it calls
	// retryable (the zero Policy: retry.IsRetryable, which knows
	// optimistic.ErrConflict, deadlocks and serialization failures) is a
	// conflict, counted against the operation's keys, and the operation
	// runs again with its keys locked; the zero Policy gives up after
	// retry.DefaultMaxElapsed.
	Retry retry.Policy
}

// Plan tells an attempt of Adaptive.Do how to run.
type Plan[K cmp.Ordered] struct {
	// Lock lists the keys the attempt must lock (SELECT … FOR UPDATE)
	// before it reads anything, in this order — ascending, without
	// duplicates, so that no two attempts deadlock on them. The attempt
	// reads and writes every other key optimistically: it reads the row
	// with its version and writes with a compare-and-swap
	// (optimistic.ErrConflict when another writer came first). Empty: the
	// whole operation is optimistic; with one key it needs no
	// transaction.
	Lock []K
	// Attempt counts the calls of the operation, 1 for the first.
	Attempt int
}

// Optimistic reports whether the plan locks nothing.
func (p Plan[K]) Optimistic() bool { return len(p.Lock) == 0 }

// Locked reports whether the plan locks key.
func (p Plan[K]) Locked(key K) bool {
	_, ok := slices.BinarySearch(p.Lock, key)
	return ok
}

// An Adaptive chooses, per key and per operation, between optimistic and
// pessimistic concurrency control, as MOCC (Wang and Kimura, VLDB 2016)
// does: it keeps a decaying conflict count (the key's temperature) for
// every key in bounded memory; an operation reads and writes cold keys
// optimistically and locks hot ones before it reads them. When an attempt
// conflicts, its keys get warmer and the next attempt locks all of them
// in key order — the retrospective lock list — so a retry does not lose
// the same race again and cannot deadlock with another Adaptive's retry.
//
// A hot key whose updates commute (counters, stock) is better served by a
// Combiner than by a lock: Hot tells the caller where to send it; with a
// Table.VersionColumn the Combiner's batches conflict with the optimistic
// writers of the same row, so the two can share it.
//
// Keys are compared with < to order locks; the sketch tells keys apart by
// their hash (maphash.Comparable), so a key type whose equal values hash
// differently (pointers to equal strings) counts them apart. An Adaptive is
// safe for concurrent use; its zero value is not usable (NewAdaptive).
type Adaptive[K cmp.Ordered] struct {
	temp  *temperature
	hot   uint32
	retry retry.Policy
	class func(error) bool
}

// NewAdaptive returns an Adaptive with the options o (nil: defaults), or
// an error matching concurkit.ErrInvalidArgument for a negative field or
// an invalid Retry policy.
func NewAdaptive[K cmp.Ordered](o *AdaptiveOptions) (*Adaptive[K], error) {
	return newAdaptive[K](o, time.Now)
}

func newAdaptive[K cmp.Ordered](o *AdaptiveOptions, now func() time.Time) (*Adaptive[K], error) {
	var n AdaptiveOptions
	if o != nil {
		n = *o
	}
	if n.HotAfter < 0 || n.HalfLife < 0 || n.SketchWidth < 0 {
		return nil, invalid("negative HotAfter (%d), HalfLife (%v) or SketchWidth (%d)", n.HotAfter, n.HalfLife, n.SketchWidth)
	}
	if n.SketchWidth > 1<<24 {
		return nil, invalid("SketchWidth %d above 16,777,216", n.SketchWidth)
	}
	if err := n.Retry.Validate(); err != nil {
		return nil, invalid("retry: %v", err)
	}
	n.HotAfter = cmp.Or(n.HotAfter, DefaultHotAfter)
	n.HalfLife = cmp.Or(n.HalfLife, DefaultHalfLife)
	n.SketchWidth = cmp.Or(n.SketchWidth, DefaultSketchWidth)
	class := n.Retry.Retryable
	if class == nil {
		class = retry.IsRetryable
	}
	return &Adaptive[K]{
		temp:  newTemperature(n.SketchWidth, n.HalfLife, now),
		hot:   uint32(min(n.HotAfter, math.MaxInt32)),
		retry: n.Retry,
		class: class,
	}, nil
}

// Temperature returns the key's decayed conflict count: about the
// conflicts of the last half-life, plus half of those of the one before,
// and so on (never less; more only when the sketch's counters are shared
// with hotter keys).
func (a *Adaptive[K]) Temperature(key K) int { return int(a.temp.get(hash(a.temp, key))) }

// Hot reports whether the key's temperature reached HotAfter: an
// operation on it locks it (Do) — or, for a commutative update, the caller
// may send it to a Combiner instead.
func (a *Adaptive[K]) Hot(key K) bool { return a.temp.get(hash(a.temp, key)) >= a.hot }

// Conflict counts one conflict on key, for a caller that learnt of it
// outside Do (a Combiner's batch that lost to a writer elsewhere, say).
func (a *Adaptive[K]) Conflict(key K) { a.temp.heat(hash(a.temp, key)) }

// Do runs the operation on keys (in any order; duplicates are ignored)
// through attempt, with a Plan per call: the first locks the hot keys,
// a retry after a conflict locks them all (see Adaptive). It returns nil
// once an attempt does; an attempt's error that the Retry policy does not
// call retryable, at once; when the policy's budget runs out, a
// *retry.ExhaustedError wrapping the last conflict; when ctx ends, its
// error joined with the last conflict. No keys or a nil attempt is an
// error matching concurkit.ErrInvalidArgument, returned before any call.
//
// Do does not begin or commit transactions: attempt does, as its plan
// asks (an optimistic one-key plan needs none; a plan that locks runs in
// one transaction, locks first).
func (a *Adaptive[K]) Do(ctx context.Context, keys []K, attempt func(ctx context.Context, p Plan[K]) error) error {
	if len(keys) == 0 {
		return invalid("Adaptive.Do with no keys")
	}
	if attempt == nil {
		return invalid("Adaptive.Do with a nil attempt")
	}
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = hash(a.temp, k)
	}
	var p Plan[K]
	for i, h := range hs {
		if a.temp.get(h) >= a.hot {
			p.Lock = append(p.Lock, keys[i])
		}
	}
	return retry.Do(ctx, a.retry, func(ctx context.Context) error {
		p.Attempt++
		err := attempt(ctx, p)
		if err == nil || !a.class(err) {
			return err
		}
		// A conflict: warm the keys the attempt did not lock (a locked
		// key cannot have lost a compare-and-swap), or all of them when
		// it locked every one (a deadlock or serialization failure with
		// a writer outside this Adaptive), and lock all next time.
		all := len(p.Lock) == len(keys)
		for i, h := range hs {
			if all || !p.Locked(keys[i]) {
				a.temp.heat(h)
			}
		}
		p.Lock = keys
		return err
	})
}
