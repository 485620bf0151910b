package optimistic_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/retry"
)

var errSoldOut = errors.New("sold out")

// TestOversell: 64 buyers, each on its own connection, released together by
// a barrier, race for the last unit. Exactly one buys it; the others see
// "sold out" after their CAS conflicts; stock ends at 0.
func TestOversell(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "inventory", "stock")
			s.insert(t, 1, 1)
			workers := make([]*store, maxWorkers)
			for i := range workers {
				workers[i] = s.worker(t)
			}
			var (
				start     = make(chan struct{})
				wg        sync.WaitGroup
				conflicts atomic.Int64
				errs      = make([]error, maxWorkers)
			)
			policy := retry.Policy{
				MaxAttempts: 50,
				MaxDelay:    20 * time.Millisecond,
			}
			ctx := countRetries(t.Context(), &conflicts)
			for i, w := range workers {
				wg.Go(func() {
					<-start
					errs[i] = optimistic.Do(ctx, policy, func(ctx context.Context) error {
						stock, version, err := w.read(ctx, 1)
						if err != nil {
							return err
						}
						if stock == 0 {
							return errSoldOut
						}
						_, err = w.update(ctx, int64(1), version, map[string]any{"stock": stock - 1})
						return err
					})
				})
			}
			close(start)
			wg.Wait()
			var bought, soldOut int
			for i, err := range errs {
				switch {
				case err == nil:
					bought++
				case errors.Is(err, errSoldOut):
					soldOut++
				default:
					t.Errorf("buyer %d: unexpected error %v", i, err)
				}
			}
			stock, version, err := s.read(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: bought=%d soldOut=%d retries=%d stock=%d version=%d", b.name, bought, soldOut, conflicts.Load(), stock, version)
			if bought != 1 || soldOut != maxWorkers-1 || stock != 0 || version != 2 {
				t.Fatalf("bought %d, sold out %d, stock %d, version %d; want 1, %d, 0, 2", bought, soldOut, stock, version, maxWorkers-1)
			}
		})
	}
}

// TestLostUpdate: 32 workers × 50 increments of one counter through the CAS
// and the retry wrapper end at exactly 1,600.
func TestLostUpdate(t *testing.T) {
	const workers, increments = 32, 50
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "counters", "value")
			s.insert(t, 1, 0)
			var (
				start   = make(chan struct{})
				wg      sync.WaitGroup
				retries atomic.Int64
				errs    = make([]error, workers)
			)
			policy := retry.Policy{
				MaxAttempts: 10_000,
				BaseDelay:   50 * time.Millisecond,
				MaxDelay:    2000 * time.Millisecond,
			}
			ctx := countRetries(t.Context(), &retries)
			for i := range workers {
				w := s.worker(t)
				wg.Go(func() {
					<-start
					for range increments {
						_, err := optimistic.DoValue(ctx, policy, func(ctx context.Context) (int64, error) {
							v, version, err := w.read(ctx, 1)
							if err != nil {
								return 0, err
							}
							return w.update(ctx, int64(1), version, map[string]any{"value": v + 1})
						})
						if err != nil {
							errs[i] = err
							return
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			value, version, err := s.read(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: value=%d version=%d retries=%d", b.name, value, version, retries.Load())
			if value != workers*increments || version != workers*increments+1 {
				t.Fatalf("value %d version %d; want %d, %d", value, version, workers*increments, workers*increments+1)
			}
		})
	}
}

// countRetries returns ctx with hooks that count the retries (not the
// final give-up) into n.
func countRetries(ctx context.Context, n *atomic.Int64) context.Context {
	return observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			n.Add(1)
		}
	}})
}
