package saga_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/internal/sagatest"
)

// TestSuiteMemory runs the store suite on the in-memory store: the engine's
// behaviour without a server (the adapters run the same suite on theirs).
func TestSuiteMemory(t *testing.T) {
	sagatest.Run(t, memoryHarness)
}

func memoryHarness(t *testing.T) *sagatest.Harness {
	m := sagatest.NewMemory()
	var mu sync.Mutex
	effects := map[string]int{}
	return &sagatest.Harness{
		Store: func(*testing.T) saga.Store { return m.Handle() },
		Crashable: func(*testing.T) (saga.Store, func()) {
			h := m.Handle()
			return h, h.Kill
		},
		Effect: func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			effects[key]++
			return nil
		},
		Effects: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			var keys []string
			for k := range effects {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return keys, nil
		},
		LockRow: func(t *testing.T, key string) (time.Time, func()) { return m.LockRow(key) },
		Load:    m.Load,
		Unfinished: func(ctx context.Context, now time.Time, limit int) ([]*saga.Record, error) {
			return m.Unfinished(ctx, now, limit)
		},
	}
}
