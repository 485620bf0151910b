package hotrow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/optimistic"
)

// mapStore is a Store on a map, to show the Combiner without a database;
// hotrowpg.NewStore and hotrowmysql.NewStore are the real ones.
type mapStore struct {
	mu sync.Mutex
	v  map[string]int64
}

func (s *mapStore) TryAdd(_ context.Context, key string, b hotrow.Batch, floor int64) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.v[key]
	if !ok || b.Checked && v+b.Low < floor {
		return 0, false, nil // the Combiner takes the locked path
	}
	s.v[key] = v + b.Delta
	return s.v[key], true, nil
}

func (s *mapStore) Locked(_ context.Context, key string, plan func(int64) int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.v[key]
	if !ok {
		return hotrow.ErrNotFound
	}
	s.v[key] = plan(v)
	return nil
}

func ExampleCombiner() {
	ctx := context.Background()
	store := &mapStore{v: map[string]int64{"apples": 3}}
	c, err := hotrow.NewCombiner[string](store, &hotrow.Options{Floor: hotrow.AtLeast(0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	// 5 buyers at once for 3 apples: their requests share batches, and
	// exactly 3 get one.
	var wg sync.WaitGroup
	var mu sync.Mutex
	sold, refused := 0, 0
	for range 5 {
		wg.Go(func() {
			_, err := c.Add(ctx, "apples", -1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				sold++
			case errors.Is(err, hotrow.ErrInsufficient):
				refused++
			}
		})
	}
	wg.Wait()
	left, err := c.Add(ctx, "apples", 0)
	fmt.Println(sold, refused, left, err)
	// Output: 3 2 0 <nil>
}

func ExampleNewBatch() {
	b, ok := hotrow.NewBatch(true, -2, +5, -4)
	fmt.Printf("%+v %v\n", b, ok)
	// Output: {Delta:-1 Low:-2 High:3 Checked:true} true
}

// mapLedger is a LedgerStore on a map, to show the Ledger without a
// database; hotrowpg.NewLedgerStore and hotrowmysql.NewLedgerStore are the
// real ones.
type mapLedger struct {
	mu sync.Mutex
	v  map[string]int64
}

func (s *mapLedger) Apply(_ context.Context, keys []string, plan func([]int64, []bool)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, found := make([]int64, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		v[i], found[i] = s.v[k]
	}
	plan(v, found)
	for i, k := range keys {
		if found[i] {
			s.v[k] = v[i]
		}
	}
	return nil
}

func ExampleLedger() {
	ctx := context.Background()
	store := &mapLedger{v: map[string]int64{"alice": 100, "bob": 0}}
	ledger, err := hotrow.NewLedger[string](store, nil) // nil Floor: no overdraft
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ledger.Close(ctx)

	b, err := ledger.Transfer(ctx, hotrow.Transfer[string]{From: "alice", To: "bob", Amount: 70})
	fmt.Printf("%+v %v\n", b, err)
	_, err = ledger.Transfer(ctx, hotrow.Transfer[string]{From: "alice", To: "bob", Amount: 70})
	fmt.Println(errors.Is(err, hotrow.ErrInsufficient))
	_, err = ledger.Transfer(ctx, hotrow.Transfer[string]{From: "alice", To: "carol", Amount: 1})
	fmt.Println(errors.Is(err, hotrow.ErrNotFound))
	// Output:
	// {From:30 To:70} <nil>
	// true
	// true
}

// mapShards is a ShardStore on a map, to show a Sharded counter without a
// database; hotrowpg.NewShardStore and hotrowmysql.NewShardStore are the
// real ones.
type mapShards struct {
	mu sync.Mutex
	v  map[string][]int64
}

func (s *mapShards) TryAdd(_ context.Context, key string, shard int, delta int64, floored bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.v[key]
	if shard >= len(v) || floored && v[shard]+delta < 0 {
		return false, nil // the counter takes the locked path
	}
	v[shard] += delta
	return true, nil
}

func (s *mapShards) Locked(_ context.Context, key string, plan func([]int64) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.v[key]
	if !ok {
		return hotrow.ErrNotFound
	}
	w := append([]int64(nil), v...)
	if err := plan(w); err != nil {
		return err
	}
	s.v[key] = w
	return nil
}

func (s *mapShards) Sum(_ context.Context, key string) (int64, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum int64
	for _, x := range s.v[key] {
		sum += x
	}
	return sum, len(s.v[key]), nil
}

func (s *mapShards) Insert(_ context.Context, key string, v []int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.v[key]; ok {
		return hotrow.ErrExists
	}
	s.v[key] = v
	return nil
}

func ExampleSharded() {
	ctx := context.Background()
	store := &mapShards{v: map[string][]int64{}}
	counter, err := hotrow.NewSharded[string](store, &hotrow.ShardedOptions{Shards: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	// 10 tickets over 4 shard rows: 3, 3, 2, 2.
	if err := counter.Create(ctx, "tickets", 10); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.v["tickets"])

	// 12 buyers at once: each Take updates one shard; a shard that runs
	// dry borrows from the others. Exactly 10 get a ticket.
	var wg sync.WaitGroup
	var mu sync.Mutex
	sold, refused := 0, 0
	for range 12 {
		wg.Go(func() {
			err := counter.Take(ctx, "tickets", 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				sold++
			case errors.Is(err, hotrow.ErrInsufficient):
				refused++
			}
		})
	}
	wg.Wait()
	_ = counter.Add(ctx, "tickets", 5) // restock
	left, err := counter.Value(ctx, "tickets")
	fmt.Println(sold, refused, left, err)
	// Output:
	// [3 3 2 2]
	// 10 2 5 <nil>
}

// An Adaptive runs a cold key optimistically and, after a conflict, runs
// the operation again with its keys locked; a key that keeps conflicting
// turns hot and is locked from the first attempt. Here a rival writer
// wins the first race on "sku-1".
func ExampleAdaptive() {
	a, err := hotrow.NewAdaptive[string](&hotrow.AdaptiveOptions{HotAfter: 2, HalfLife: time.Minute})
	if err != nil {
		panic(err)
	}
	stock := map[string]int64{"sku-1": 10}
	version := map[string]int64{"sku-1": 1}
	rivalWrites := 2 // the rival writes between our read and our write twice
	decrement := func(ctx context.Context, p hotrow.Plan[string]) error {
		fmt.Printf("attempt %d: lock %v\n", p.Attempt, p.Lock)
		if p.Locked("sku-1") { // SELECT … FOR UPDATE, read, write
			stock["sku-1"]--
			version["sku-1"]++
			return nil
		}
		v, ver := stock["sku-1"], version["sku-1"] // read with its version
		if rivalWrites > 0 {
			rivalWrites--
			stock["sku-1"]--
			version["sku-1"]++
		}
		if version["sku-1"] != ver { // the compare-and-swap misses
			return optimistic.ErrConflict
		}
		stock["sku-1"], version["sku-1"] = v-1, ver+1
		return nil
	}
	for range 3 {
		if err := a.Do(context.Background(), []string{"sku-1"}, decrement); err != nil {
			panic(err)
		}
		fmt.Println("hot:", a.Hot("sku-1"), "stock:", stock["sku-1"])
	}
	// Output:
	// attempt 1: lock []
	// attempt 2: lock [sku-1]
	// hot: false stock: 8
	// attempt 1: lock []
	// attempt 2: lock [sku-1]
	// hot: true stock: 6
	// attempt 1: lock [sku-1]
	// hot: true stock: 5
}
