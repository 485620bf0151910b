package hotrow

import (
	"context"
	"errors"
	"math"
	"math/big"
	"slices"
	"sync"
	"testing"

	"github.com/concurkit/concurkit"
)

// memShards is the reference ShardStore: shard values per key under one
// mutex. slow makes TryAdd refuse, so every update takes the locked path.
type memShards struct {
	mu   sync.Mutex
	v    map[string][]int64
	slow bool
}

func (m *memShards) TryAdd(_ context.Context, key string, shard int, delta int64, floored bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.v[key]
	if m.slow || !ok || shard >= len(v) {
		return false, nil
	}
	nv, ok := add(v[shard], delta)
	if !ok || floored && nv < 0 {
		return false, nil
	}
	v[shard] = nv
	return true, nil
}

func (m *memShards) Locked(_ context.Context, key string, plan func([]int64) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.v[key]
	if !ok {
		return ErrNotFound
	}
	w := slices.Clone(v)
	if err := plan(w); err != nil {
		return err
	}
	m.v[key] = w
	return nil
}

func (m *memShards) Sum(_ context.Context, key string) (int64, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := new(big.Int)
	for _, x := range m.v[key] {
		s.Add(s, big.NewInt(x))
	}
	if !s.IsInt64() {
		return 0, len(m.v[key]), ErrOverflow
	}
	return s.Int64(), len(m.v[key]), nil
}

func (m *memShards) Insert(_ context.Context, key string, v []int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.v[key]; ok {
		return ErrExists
	}
	m.v[key] = slices.Clone(v)
	return nil
}

// TestNewShardedInvalid: nil and typed-nil stores, shard counts at and past
// the bounds.
func TestNewShardedInvalid(t *testing.T) {
	var typedNil *memShards
	for name, c := range map[string]struct {
		s ShardStore[string]
		o *ShardedOptions
	}{
		"nil store":       {nil, nil},
		"typed-nil store": {typedNil, nil},
		"negative shards": {&memShards{}, &ShardedOptions{Shards: -1}},
		"too many shards": {&memShards{}, &ShardedOptions{Shards: MaxShards + 1}},
	} {
		if _, err := NewSharded(c.s, c.o); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	for _, n := range []int{0, 1, MaxShards} {
		if _, err := NewSharded[string](&memShards{}, &ShardedOptions{Shards: n}); err != nil {
			t.Errorf("Shards %d: %v", n, err)
		}
	}
}

// TestSpread: parts differ by at most one and sum to the total, at the
// int64 edges too.
func TestSpread(t *testing.T) {
	for _, total := range []int64{0, 1, -1, 15, -15, 17, -17, math.MaxInt64, math.MinInt64} {
		for _, n := range []int{1, 2, 3, 16, MaxShards} {
			v := spread(total, n)
			s := new(big.Int)
			lo, hi := v[0], v[0]
			for _, x := range v {
				s.Add(s, big.NewInt(x))
				lo, hi = min(lo, x), max(hi, x)
			}
			if len(v) != n || !s.IsInt64() || s.Int64() != total || hi-lo > 1 {
				t.Errorf("spread(%d, %d) = %v: sum %v, spread %d", total, n, v, s, hi-lo)
			}
		}
	}
}

// TestShardedLockedPath: with the fast path refused every time, Add and
// Take keep the counter exact: Take borrows across shards and spreads the
// rest; a sum past MaxUint64/2 is taken from in shard order.
func TestShardedLockedPath(t *testing.T) {
	ctx := t.Context()
	m := &memShards{v: map[string][]int64{}, slow: true}
	s, err := NewSharded[string](m, &ShardedOptions{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "k", 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Take(ctx, "k", 7); err != nil {
		t.Fatal(err)
	}
	if got := m.v["k"]; !slices.Equal(got, []int64{1, 1, 1, 0}) {
		t.Errorf("after Take(7) of 10 on 4 shards: %v, want [1 1 1 0]", got)
	}
	if err := s.Take(ctx, "k", 4); !errors.Is(err, ErrInsufficient) {
		t.Errorf("Take(4) of 3: %v, want ErrInsufficient", err)
	}
	if err := s.Add(ctx, "k", math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Value(ctx, "k"); !errors.Is(err, ErrOverflow) {
		t.Errorf("Value of MaxInt64+3: %d, %v, want ErrOverflow", v, err)
	}
	// Three shards at MaxInt64: the sum is past the int64 range, the rest
	// is spread exactly.
	m.v["big"] = []int64{math.MaxInt64, math.MaxInt64, math.MaxInt64}
	if err := s.Take(ctx, "big", math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	const third = 6148914691236517204 // ⌊2·MaxInt64/3⌋, remainder 2
	if got := m.v["big"]; !slices.Equal(got, []int64{third + 1, third + 1, third}) {
		t.Errorf("after Take(MaxInt64) of 3×MaxInt64: %v", got)
	}
	if err := s.Take(ctx, "big", 1); err != nil {
		t.Fatal(err)
	}
	if got := m.v["big"]; !slices.Equal(got, []int64{third + 1, third, third}) {
		t.Errorf("after Take(1): %v", got)
	}
	// A shard below zero (an Add decremented a stock key) counts: the sum
	// is what Take takes from.
	m.v["neg"] = []int64{-5, 3, 3}
	if err := s.Take(ctx, "neg", 2); !errors.Is(err, ErrInsufficient) {
		t.Errorf("Take(2) of [-5 3 3]: %v, want ErrInsufficient", err)
	}
	if err := s.Take(ctx, "neg", 1); err != nil {
		t.Fatal(err)
	}
	if got := m.v["neg"]; !slices.Equal(got, []int64{0, 0, 0}) {
		t.Errorf("after Take(1) of [-5 3 3]: %v, want [0 0 0]", got)
	}
}
