package hotrow

import (
	"context"
	"errors"
	"math/big"
	"math/rand/v2"

	"github.com/concurkit/concurkit/internal/handle"
)

// Shard counts of a Sharded counter.
const (
	// DefaultShards is ShardedOptions.Shards when zero.
	DefaultShards = 16
	// MaxShards bounds ShardedOptions.Shards: Value reads every shard row.
	MaxShards = 1024
)

// ShardStore holds the shard rows of Sharded counters: one row per (key,
// shard) with an integer value; a key's value is the sum of its rows. The
// adapters (hotrowpg.NewShardStore, hotrowmysql.NewShardStore) implement
// it; every method is one transaction of its own.
type ShardStore[K comparable] interface {
	// TryAdd adds delta to the value v of key's shard in one statement,
	// provided v + delta stays in the int64 range and, when floored, at
	// or above zero. ok is false, with nothing changed, when a check
	// failed or the row is missing. An error whose outcome is unknown is
	// a *concurkit.AmbiguousCommitError.
	TryAdd(ctx context.Context, key K, shard int, delta int64, floored bool) (ok bool, err error)
	// Locked runs one transaction that locks every shard row of key in
	// shard order (FOR UPDATE), calls plan once with their values in
	// that order, writes the rows whose value plan changed (in place)
	// and commits. When plan returns an error, nothing is written and
	// Locked returns that error. A transaction the database rolled back
	// may be run again, plan included (see Store.Locked). No row is
	// ErrNotFound (plan is not called); a commit whose outcome is unknown
	// is a *concurkit.AmbiguousCommitError.
	Locked(ctx context.Context, key K, plan func(v []int64) error) error
	// Sum returns the sum of key's shard values, read in one statement,
	// and the number of its shard rows (0: the key has none, and sum is
	// 0). A sum outside the int64 range is ErrOverflow.
	Sum(ctx context.Context, key K) (sum int64, shards int, err error)
	// Insert creates key's shard rows in one transaction, shard i with
	// value v[i]. A key that has shard rows already is ErrExists, and
	// nothing is inserted.
	Insert(ctx context.Context, key K, v []int64) error
}

// ShardedOptions configure a Sharded counter. Nil means every default.
type ShardedOptions struct {
	// Shards is the number of shard rows per key that Create makes and
	// that Add and Take pick from at random; 1 to MaxShards. Zero means
	// DefaultShards. More shards take more concurrent writers without
	// waiting for each other, and make Value read more rows.
	Shards int
}

// Sharded is a counter split over shard rows (Firestore's distributed
// counters): a writer adds to one shard picked at random, so concurrent
// writers of one key mostly touch different rows and do not wait for each
// other's row lock and commit; a read sums the shards. Take is the stock
// variant: a decrement that never takes the sum below zero, one
// conditional statement on one shard while that shard holds enough, and
// otherwise one transaction that locks the key's shards in order, borrows
// from the others and spreads what remains evenly again.
//
// Add and Take are acknowledged when their statement committed; nothing
// is retried, and an outcome the store cannot know is a
// *concurkit.AmbiguousCommitError. A Sharded is safe for concurrent use and
// holds no state but its options: counters in many processes may share the
// shard rows.
type Sharded[K comparable] struct {
	store  ShardStore[K]
	shards int
}

// NewSharded returns a Sharded counter on store. It returns an error
// matching ErrInvalidArgument for a nil store or Shards outside [0,
// MaxShards].
func NewSharded[K comparable](store ShardStore[K], o *ShardedOptions) (*Sharded[K], error) {
	if handle.IsNil(store) {
		return nil, invalid("nil store")
	}
	n := DefaultShards
	if o != nil && o.Shards != 0 {
		n = o.Shards
	}
	if n < 1 || n > MaxShards {
		return nil, invalid("Shards %d outside [1, %d]", n, MaxShards)
	}
	return &Sharded[K]{store: store, shards: n}, nil
}

// Create makes key's shard rows, with initial split as evenly as integers
// allow. A key that has shard rows is ErrExists.
func (s *Sharded[K]) Create(ctx context.Context, key K, initial int64) error {
	return s.store.Insert(ctx, key, spread(initial, s.shards))
}

// Add adds delta to key's counter: one statement on one shard picked at
// random. When that shard would leave the int64 range (or has no row) it
// puts delta on a shard where it fits, in one locked transaction. A zero
// delta checks that the key exists.
//
// Errors: ErrNotFound (the key has no shard rows), ErrOverflow (delta fits
// on no shard), nothing applied; a *concurkit.AmbiguousCommitError; the
// store's error.
func (s *Sharded[K]) Add(ctx context.Context, key K, delta int64) error {
	if delta == 0 {
		_, err := s.Value(ctx, key)
		if errors.Is(err, ErrOverflow) {
			return nil // it exists
		}
		return err
	}
	shard := rand.IntN(s.shards)
	if ok, err := s.store.TryAdd(ctx, key, shard, delta, false); err != nil || ok {
		return err
	}
	return s.store.Locked(ctx, key, func(v []int64) error {
		for i := range v {
			j := (shard + i) % len(v)
			if nv, ok := add(v[j], delta); ok {
				v[j] = nv
				return nil
			}
		}
		return ErrOverflow
	})
}

// Take takes n (positive) from key's stock without letting the sum of its
// shards go below zero: one conditional statement on a shard picked at
// random while it holds n. Otherwise it reads the sum (below n: refused,
// no lock taken) and, when the stock is there, runs one transaction that
// locks all the key's shards, takes n from their sum and spreads the rest
// evenly over them (a shard runs dry once, not on every later Take).
//
// The guarantee holds while every shard is at or above zero, which Create
// with a non-negative initial, Take and positive Adds keep: a key whose
// stock Take guards must not be decremented by Add.
//
// Errors: ErrInsufficient (the sum is below n), ErrNotFound, nothing
// applied; an error matching ErrInvalidArgument for n ≤ 0; a
// *concurkit.AmbiguousCommitError; the store's error.
func (s *Sharded[K]) Take(ctx context.Context, key K, n int64) error {
	if n <= 0 {
		return invalid("Take %d: n must be positive", n)
	}
	shard := rand.IntN(s.shards)
	if ok, err := s.store.TryAdd(ctx, key, shard, -n, true); err != nil || ok {
		return err
	}
	// A sold-out key refuses without a lock: a sum read in one statement
	// is the stock at one moment during this call.
	switch sum, rows, err := s.store.Sum(ctx, key); {
	case errors.Is(err, ErrOverflow):
	case err != nil:
		return err
	case rows == 0:
		return ErrNotFound
	case sum < n:
		return ErrInsufficient
	}
	return s.store.Locked(ctx, key, func(v []int64) error {
		// The sum of n int64s may leave the int64 range: count in big.
		rest := new(big.Int)
		for _, x := range v {
			rest.Add(rest, big.NewInt(x))
		}
		if rest.Sub(rest, big.NewInt(n)).Sign() < 0 {
			return ErrInsufficient
		}
		// rest < len(v)·MaxInt64, so every part fits in an int64.
		q, r := new(big.Int).QuoRem(rest, big.NewInt(int64(len(v))), new(big.Int))
		for i := range v {
			v[i] = q.Int64()
			if int64(i) < r.Int64() {
				v[i]++
			}
		}
		return nil
	})
}

// Value returns the sum of key's shards. Errors: ErrNotFound (no shard
// rows), ErrOverflow (the sum is outside the int64 range), the store's
// error.
func (s *Sharded[K]) Value(ctx context.Context, key K) (int64, error) {
	sum, n, err := s.store.Sum(ctx, key)
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, ErrNotFound
	}
	return sum, nil
}

// spread splits total into n parts that differ by at most one and sum to
// total; the larger parts (in absolute value) come first.
func spread(total int64, n int) []int64 {
	v := make([]int64, n)
	q, r := total/int64(n), total%int64(n) // r has total's sign
	for i := range v {
		v[i] = q
		if int64(i) < r {
			v[i]++
		} else if int64(i) < -r {
			v[i]--
		}
	}
	return v
}
