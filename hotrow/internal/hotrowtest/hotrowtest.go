// Package hotrowtest is the test suite every hotrow adapter runs on its
// real server.
package hotrowtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/concurkit/concurkit/hotrow"
)

// Sizes of StockExact.
const (
	Requests = 10000
	Stock    = 1000
	Workers  = 64
)

// countingStore counts the batches a Combiner sends.
type countingStore struct {
	hotrow.Store[int64]
	batches, locked atomic.Int64
}

func (s *countingStore) TryAdd(ctx context.Context, key int64, b hotrow.Batch, floor int64) (int64, bool, error) {
	s.batches.Add(1)
	return s.Store.TryAdd(ctx, key, b, floor)
}

func (s *countingStore) Locked(ctx context.Context, key int64, plan func(int64) int64) error {
	s.locked.Add(1)
	return s.Store.Locked(ctx, key, plan)
}

// StockExact: Requests concurrent decrements (Workers goroutines) of rows
// 1 and 2, both holding Stock, by escrow (add on row 1) and by a Combiner
// on store (row 2): exactly Stock succeed, each reports a distinct value
// Stock-1…0 (the value after its own update), the stock ends at 0; the
// combiner needs far fewer commits than requests. value reads a row.
func StockExact(t *testing.T, store hotrow.Store[int64], add func(ctx context.Context, id, delta int64, floor *int64) (int64, error), value func(t *testing.T, id int64) int64) {
	t.Helper()
	cs := &countingStore{Store: store}
	c, err := hotrow.NewCombiner[int64](cs, &hotrow.Options{Floor: hotrow.AtLeast(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, tc := range []struct {
		name string
		id   int64
		take func(ctx context.Context) (int64, error)
	}{
		{"escrow", 1, func(ctx context.Context) (int64, error) { return add(ctx, 1, -1, hotrow.AtLeast(0)) }},
		{"combined", 2, func(ctx context.Context) (int64, error) { return c.Add(ctx, 2, -1) }},
	} {
		var refused, next atomic.Int64
		var mu sync.Mutex
		seen := map[int64]int{}
		var wg sync.WaitGroup
		for range Workers {
			wg.Go(func() {
				for next.Add(1) <= Requests {
					v, err := tc.take(t.Context())
					switch {
					case err == nil:
						mu.Lock()
						seen[v]++
						mu.Unlock()
					case errors.Is(err, hotrow.ErrInsufficient):
						refused.Add(1)
					default:
						t.Errorf("%s: %d, %v", tc.name, v, err)
						return
					}
				}
			})
		}
		wg.Wait()
		for v := range int64(Stock) {
			if seen[v] != 1 {
				t.Errorf("%s: value %d reported %d times, want once", tc.name, v, seen[v])
			}
		}
		if len(seen) != Stock || refused.Load() != Requests-Stock || value(t, tc.id) != 0 {
			t.Errorf("%s: %d values, %d refused, stock %d; want %d, %d, 0", tc.name, len(seen), refused.Load(), value(t, tc.id), Stock, Requests-Stock)
		}
	}
	b, l := cs.batches.Load(), cs.locked.Load()
	t.Logf("combined: %d requests in %d batches (%d took the locked path)", Requests, b, l)
	if b > Requests/2 {
		t.Errorf("%d batches for %d requests from %d goroutines: not combining", b, Requests, Workers)
	}
}
