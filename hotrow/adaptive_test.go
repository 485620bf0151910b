package hotrow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/retry"
)

// clock is a manual clock for the sketch's decay.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestAdaptive(t *testing.T, o *AdaptiveOptions) (*Adaptive[int], *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1e9, 0)}
	a, err := newAdaptive[int](o, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

// TestTemperatureDecay: conflicts add up, halve every half-life (lazily,
// however many passed), and a key nobody touched stays at 0.
func TestTemperatureDecay(t *testing.T) {
	a, c := newTestAdaptive(t, &AdaptiveOptions{HalfLife: time.Second, HotAfter: 2})
	for range 5 {
		a.Conflict(7)
	}
	steps := []struct {
		after time.Duration
		want  int
		hot   bool
	}{
		{0, 5, true},
		{999 * time.Millisecond, 5, true},
		{time.Millisecond, 2, true}, // 5 >> 1
		{time.Second, 1, false},
		{40 * time.Second, 0, false}, // shifts are capped, not wrapped
	}
	for i, s := range steps {
		c.add(s.after)
		if got, hot := a.Temperature(7), a.Hot(7); got != s.want || hot != s.hot {
			t.Fatalf("step %d: temperature %d hot %v; want %d %v", i, got, hot, s.want, s.hot)
		}
	}
	if got := a.Temperature(8); got != 0 {
		t.Fatalf("untouched key: temperature %d; want 0", got)
	}
}

// TestTemperatureNeverUnder: a count-min sketch may overestimate a key
// that shares counters with hotter ones, never underestimate; a sketch far
// smaller than the key space stays that small.
func TestTemperatureNeverUnder(t *testing.T) {
	a, _ := newTestAdaptive(t, &AdaptiveOptions{SketchWidth: 100})
	if w := len(a.temp.cells[0]); w != 128 {
		t.Fatalf("width %d; want 100 rounded up to 128", w)
	}
	const keys = 5000
	for k := range keys {
		for range k % 7 {
			a.Conflict(k)
		}
	}
	over := 0
	for k := range keys {
		got := a.Temperature(k)
		if got < k%7 {
			t.Fatalf("key %d: temperature %d below its %d conflicts", k, got, k%7)
		}
		if got > k%7 {
			over++
		}
	}
	t.Logf("%d of %d keys overestimated by a 4×128 sketch", over, keys)

	// At the default width, 200 keys with conflicts leave the rest at 0
	// but for about (200/4096)^4 of them: 0.06 expected in 10,000.
	b, _ := newTestAdaptive(t, nil)
	for k := range 200 {
		b.Conflict(-1 - k)
		b.Conflict(-1 - k)
	}
	cold := 0
	for k := range 10000 {
		if b.Hot(k) {
			cold++
		}
	}
	if cold > 5 {
		t.Fatalf("%d of 10,000 keys never in conflict read hot beside 200 hot ones", cold)
	}
}

// TestAdaptivePlans: a cold key runs optimistic; a conflict warms it and
// the retry locks every key of the operation in key order; once hot, the
// first attempt locks it; a locked attempt that conflicts (a deadlock with
// an outsider) warms every key.
func TestAdaptivePlans(t *testing.T) {
	a, _ := newTestAdaptive(t, &AdaptiveOptions{HotAfter: 2, Retry: retry.Policy{BaseDelay: time.Microsecond}})
	ctx := t.Context()
	var plans []Plan[int]
	conflictOnce := func(ctx context.Context, p Plan[int]) error {
		plans = append(plans, p)
		if p.Attempt == 1 {
			return optimistic.ErrConflict
		}
		return nil
	}
	if err := a.Do(ctx, []int{3, 1, 2, 1}, conflictOnce); err != nil {
		t.Fatal(err)
	}
	want := []Plan[int]{{Attempt: 1}, {Lock: []int{1, 2, 3}, Attempt: 2}}
	if !slices.EqualFunc(plans, want, planEqual) {
		t.Fatalf("plans %v; want %v", plans, want)
	}
	for k := 1; k <= 3; k++ {
		if a.Temperature(k) != 1 || a.Hot(k) {
			t.Fatalf("key %d: temperature %d hot %v after one conflict; want 1, cold", k, a.Temperature(k), a.Hot(k))
		}
	}
	// One more conflict on key 2 only: it turns hot, and the next
	// operation locks it on its first attempt and reads 1 and 3 optimistically.
	plans = nil
	if err := a.Do(ctx, []int{2}, conflictOnce); err != nil {
		t.Fatal(err)
	}
	plans = nil
	if err := a.Do(ctx, []int{3, 2, 1}, conflictOnce); err != nil {
		t.Fatal(err)
	}
	want = []Plan[int]{{Lock: []int{2}, Attempt: 1}, {Lock: []int{1, 2, 3}, Attempt: 2}}
	if !slices.EqualFunc(plans, want, planEqual) {
		t.Fatalf("plans %v; want %v", plans, want)
	}
	if !plans[0].Locked(2) || plans[0].Locked(1) || plans[0].Optimistic() {
		t.Fatalf("plan %v: Locked/Optimistic disagree with Lock", plans[0])
	}
	// That conflict warmed 1 and 3 (not locked), not 2 (locked).
	if got := []int{a.Temperature(1), a.Temperature(2), a.Temperature(3)}; !slices.Equal(got, []int{2, 2, 2}) {
		t.Fatalf("temperatures %v; want [2 2 2]", got)
	}
	// Every key hot: a deadlock of the fully locked attempt warms them all.
	plans = nil
	deadlock := func(ctx context.Context, p Plan[int]) error {
		plans = append(plans, p)
		if p.Attempt == 1 {
			return fmt.Errorf("wrapped: %w", retryable{})
		}
		return nil
	}
	if err := a.Do(ctx, []int{1, 3}, deadlock); err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || !slices.Equal(plans[0].Lock, []int{1, 3}) || a.Temperature(1) != 3 || a.Temperature(3) != 3 {
		t.Fatalf("plans %v temperatures %d %d; want both locked, both at 3", plans, a.Temperature(1), a.Temperature(3))
	}
}

type retryable struct{}

func (retryable) Error() string   { return "deadlock" }
func (retryable) Retryable() bool { return true }

func planEqual(a, b Plan[int]) bool { return a.Attempt == b.Attempt && slices.Equal(a.Lock, b.Lock) }

// TestAdaptiveErrors: a failure that is not a conflict returns at once and
// warms nothing; the policy's budget ends in *retry.ExhaustedError; a
// cancelled context is joined with the last conflict; bad input is
// ErrInvalidArgument before any call.
func TestAdaptiveErrors(t *testing.T) {
	boom := errors.New("boom")
	a, _ := newTestAdaptive(t, &AdaptiveOptions{Retry: retry.Policy{MaxAttempts: 3, BaseDelay: time.Microsecond}})
	calls := 0
	err := a.Do(t.Context(), []int{1}, func(context.Context, Plan[int]) error { calls++; return boom })
	if err != boom || calls != 1 || a.Temperature(1) != 0 {
		t.Fatalf("err %v after %d calls, temperature %d; want boom after 1, 0", err, calls, a.Temperature(1))
	}
	calls = 0
	err = a.Do(t.Context(), []int{1}, func(context.Context, Plan[int]) error { calls++; return optimistic.ErrConflict })
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) || ex.Attempts != 3 || calls != 3 || !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("err %v after %d calls; want *retry.ExhaustedError after 3 matching ErrConflict", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	b, _ := newTestAdaptive(t, nil)
	err = b.Do(ctx, []int{1}, func(context.Context, Plan[int]) error { cancel(); return optimistic.ErrConflict })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("cancelled: %v; want context.Canceled joined with ErrConflict", err)
	}
	called := false
	noop := func(context.Context, Plan[int]) error { called = true; return nil }
	for name, err := range map[string]error{
		"no keys":     b.Do(t.Context(), nil, noop),
		"nil attempt": b.Do(t.Context(), []int{1}, nil),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
	if called {
		t.Error("attempt called on bad input")
	}
	for name, o := range map[string]*AdaptiveOptions{
		"negative HotAfter": {HotAfter: -1}, "negative HalfLife": {HalfLife: -time.Second},
		"negative width": {SketchWidth: -1}, "huge width": {SketchWidth: 1 << 30},
		"bad retry": {Retry: retry.Policy{MaxAttempts: -1}},
	} {
		if _, err := NewAdaptive[string](o); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
}

// row is one versioned row of rows, the in-memory table of
// TestAdaptiveExact: mu is its row lock (FOR UPDATE), and a
// compare-and-swap takes it for the write only.
type row struct {
	mu         sync.Mutex
	v, version int64
}

// TestAdaptiveExact: 32 goroutines increment 4 rows, 90 % of operations on
// row 0, through the plans of one Adaptive — a locked key under its row
// lock, the others by read, yield, compare-and-swap. Every acknowledged
// increment is in the rows, none twice; the hot row turns hot and its
// later operations lock it on their first attempt, so conflicts stay a
// small share.
func TestAdaptiveExact(t *testing.T) {
	a, err := NewAdaptive[int](&AdaptiveOptions{Retry: retry.Policy{BaseDelay: time.Microsecond, MaxDelay: 10 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]row, 4)
	var acks, conflicts, lockedFirst atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		r := rand.New(rand.NewPCG(uint64(g), 1))
		wg.Go(func() {
			for range 300 {
				k := 0
				if r.IntN(10) == 0 {
					k = 1 + r.IntN(3)
				}
				err := a.Do(t.Context(), []int{k}, func(ctx context.Context, p Plan[int]) error {
					x := &rows[k]
					if p.Locked(k) {
						if p.Attempt == 1 {
							lockedFirst.Add(1)
						}
						x.mu.Lock()
						x.v, x.version = x.v+1, x.version+1
						x.mu.Unlock()
						return nil
					}
					x.mu.Lock()
					v, ver := x.v, x.version
					x.mu.Unlock()
					runtime.Gosched() // another writer may come in here
					x.mu.Lock()
					defer x.mu.Unlock()
					if x.version != ver {
						conflicts.Add(1)
						return optimistic.ErrConflict
					}
					x.v, x.version = v+1, ver+1
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				acks.Add(1)
			}
		})
	}
	wg.Wait()
	var sum int64
	for i := range rows {
		sum += rows[i].v
	}
	if sum != acks.Load() || sum != 32*300 {
		t.Fatalf("rows sum %d; want the %d acknowledged increments (%d sent)", sum, acks.Load(), 32*300)
	}
	t.Logf("%d conflicts, %d first attempts locked, row 0 temperature %d", conflicts.Load(), lockedFirst.Load(), a.Temperature(0))
	if conflicts.Load() > 0 && lockedFirst.Load() == 0 {
		t.Fatalf("%d conflicts, yet no operation locked its key on the first attempt", conflicts.Load())
	}
}

// BenchmarkAdaptiveDo measures what Do adds to a cold key's operation
// (the attempt itself does nothing): the optimistic path of the adaptive
// strategy runs the cas strategy's statements, plus this.
func BenchmarkAdaptiveDo(b *testing.B) {
	a, err := NewAdaptive[int64](nil)
	if err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context, Plan[int64]) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var k int64
		for pb.Next() {
			k++
			if err := a.Do(context.Background(), []int64{k % 10000}, noop); err != nil {
				b.Error(err)
			}
		}
	})
}
