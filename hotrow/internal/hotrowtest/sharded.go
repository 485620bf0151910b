package hotrowtest

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
)

// ShardTable is the shard table of ShardedExact: key id (bigint), shard,
// value v; ShardTableSQL creates it in either dialect.
var ShardTable = hotrow.Table{Name: "shards"}

// ShardTableSQL creates ShardTable (PostgreSQL and MariaDB/MySQL alike).
const ShardTableSQL = `CREATE TABLE shards (id BIGINT NOT NULL, shard INT NOT NULL, v BIGINT NOT NULL, PRIMARY KEY (id, shard))`

// countingShards counts a Sharded counter's locked transactions.
type countingShards struct {
	hotrow.ShardStore[int64]
	locked atomic.Int64
}

func (s *countingShards) Locked(ctx context.Context, key int64, plan func([]int64) error) error {
	s.locked.Add(1)
	return s.ShardStore.Locked(ctx, key, plan)
}

// ShardedExact runs a Sharded counter of 16 shards on store (ShardTable):
//   - stock: Requests concurrent Take(1) (Workers goroutines, split between
//     two counters, as two processes) of a stock of Stock: exactly Stock
//     succeed, the others are ErrInsufficient, every shard ends at 0 and
//     never went below (shards reads a key's shard values);
//   - counter: Requests concurrent Adds of ±1…100: the value equals the
//     acknowledged net;
//   - errors: Create of an existing key is ErrExists, a missing key is
//     ErrNotFound for Add, Take and Value, a Take of 0 is invalid;
//   - edges: Add past MaxInt64 lands on a shard with room, or is
//     ErrOverflow with nothing applied; a sum past MaxInt64 is ErrOverflow
//     for Value and still taken from exactly.
func ShardedExact(t *testing.T, store hotrow.ShardStore[int64], shards func(t *testing.T, key int64) []int64) {
	t.Helper()
	ctx := t.Context()
	cs := &countingShards{ShardStore: store}
	var counters [2]*hotrow.Sharded[int64]
	for i := range counters {
		c, err := hotrow.NewSharded[int64](cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		counters[i] = c
	}
	c := counters[0]

	t.Run("stock", func(t *testing.T) {
		if err := c.Create(ctx, 1, Stock); err != nil {
			t.Fatal(err)
		}
		var took, refused, next atomic.Int64
		var wg sync.WaitGroup
		for w := range Workers {
			wg.Go(func() {
				for next.Add(1) <= Requests {
					switch err := counters[w%2].Take(ctx, 1, 1); {
					case err == nil:
						took.Add(1)
					case errors.Is(err, hotrow.ErrInsufficient):
						refused.Add(1)
					default:
						t.Errorf("Take: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		v, err := c.Value(ctx, 1)
		if took.Load() != Stock || refused.Load() != Requests-Stock || err != nil || v != 0 {
			t.Errorf("%d taken, %d refused, value %d (%v); want %d, %d, 0", took.Load(), refused.Load(), v, err, Stock, Requests-Stock)
		}
		got := shards(t, 1)
		for i, x := range got {
			if x != 0 {
				t.Errorf("shard %d ends at %d, want 0", i, x)
			}
		}
		if len(got) != hotrow.DefaultShards {
			t.Errorf("%d shard rows, want %d", len(got), hotrow.DefaultShards)
		}
		t.Logf("stock: %d takes, %d locked transactions", Requests, cs.locked.Load())
	})

	t.Run("counter", func(t *testing.T) {
		if err := c.Create(ctx, 2, 0); err != nil {
			t.Fatal(err)
		}
		var net, next atomic.Int64
		var wg sync.WaitGroup
		for w := range Workers {
			wg.Go(func() {
				for next.Add(1) <= Requests {
					d := rand.Int64N(201) - 100
					if err := counters[w%2].Add(ctx, 2, d); err != nil {
						t.Errorf("Add(%d): %v", d, err)
						return
					}
					net.Add(d)
				}
			})
		}
		wg.Wait()
		if v, err := c.Value(ctx, 2); err != nil || v != net.Load() {
			t.Errorf("value %d (%v), want the acknowledged net %d", v, err, net.Load())
		}
	})

	t.Run("errors", func(t *testing.T) {
		if err := c.Create(ctx, 1, 5); !errors.Is(err, hotrow.ErrExists) {
			t.Errorf("Create of an existing key: %v, want ErrExists", err)
		}
		if v, err := c.Value(ctx, 1); v != 0 || err != nil {
			t.Errorf("after the refused Create: %d, %v; want 0", v, err)
		}
		for name, err := range map[string]error{
			"Add":    c.Add(ctx, 99, 1),
			"Add(0)": c.Add(ctx, 99, 0),
			"Take":   c.Take(ctx, 99, 1),
		} {
			if !errors.Is(err, hotrow.ErrNotFound) {
				t.Errorf("%s on a missing key: %v, want ErrNotFound", name, err)
			}
		}
		if _, err := c.Value(ctx, 99); !errors.Is(err, hotrow.ErrNotFound) {
			t.Errorf("Value of a missing key: %v, want ErrNotFound", err)
		}
		for _, n := range []int64{0, -1, math.MinInt64} {
			if err := c.Take(ctx, 1, n); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("Take(%d): %v, want ErrInvalidArgument", n, err)
			}
		}
	})

	t.Run("edges", func(t *testing.T) {
		two, err := hotrow.NewSharded[int64](store, &hotrow.ShardedOptions{Shards: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := two.Create(ctx, 3, 0); err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // one shard each: the second lands where the first did not
			if err := two.Add(ctx, 3, math.MaxInt64); err != nil {
				t.Fatalf("Add #%d of MaxInt64: %v", i+1, err)
			}
		}
		if err := two.Add(ctx, 3, 1); !errors.Is(err, hotrow.ErrOverflow) {
			t.Errorf("Add(1) with both shards at MaxInt64: %v, want ErrOverflow", err)
		}
		if _, err := two.Value(ctx, 3); !errors.Is(err, hotrow.ErrOverflow) {
			t.Errorf("Value of 2×MaxInt64: %v, want ErrOverflow", err)
		}
		if err := two.Add(ctx, 3, 0); err != nil {
			t.Errorf("Add(0) of an existing key whose sum overflows: %v", err)
		}
		if err := two.Take(ctx, 3, math.MaxInt64); err != nil {
			t.Fatalf("Take(MaxInt64) of 2×MaxInt64: %v", err)
		}
		if v, err := two.Value(ctx, 3); err != nil || v != math.MaxInt64 {
			t.Errorf("after the Take: %d, %v; want MaxInt64", v, err)
		}
		if err := two.Take(ctx, 3, math.MaxInt64); err != nil {
			t.Fatalf("second Take(MaxInt64): %v", err)
		}
		if err := two.Take(ctx, 3, 1); !errors.Is(err, hotrow.ErrInsufficient) {
			t.Errorf("Take(1) of 0: %v, want ErrInsufficient", err)
		}
		if got := shards(t, 3); len(got) != 2 || got[0] != 0 || got[1] != 0 {
			t.Errorf("shards %v, want [0 0]", got)
		}
		// Negative: MinInt64 on one shard, -1 on the other, then nothing fits.
		if err := two.Create(ctx, 4, 0); err != nil {
			t.Fatal(err)
		}
		for _, d := range []int64{math.MinInt64, -1} {
			if err := two.Add(ctx, 4, d); err != nil {
				t.Fatalf("Add(%d): %v", d, err)
			}
		}
		if err := two.Add(ctx, 4, math.MinInt64); !errors.Is(err, hotrow.ErrOverflow) {
			t.Errorf("Add(MinInt64) that fits no shard: %v, want ErrOverflow", err)
		}
		if _, err := two.Value(ctx, 4); !errors.Is(err, hotrow.ErrOverflow) {
			t.Errorf("Value of MinInt64-1: %v, want ErrOverflow", err)
		}
		if got := shards(t, 4); len(got) != 2 || min(got[0], got[1]) != math.MinInt64 || max(got[0], got[1]) != -1 {
			t.Errorf("shards %v, want MinInt64 and -1", got)
		}
	})
}
