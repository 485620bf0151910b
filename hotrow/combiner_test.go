package hotrow

import (
	"context"
	"errors"
	"math"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is the reference Store: one map under a mutex, the semantics
// the adapters implement in SQL. Its batches counts TryAdd calls; hold,
// when set, makes the next TryAdd wait for it (and signal entered) so a
// test can queue requests behind a batch at the "database".
type memStore struct {
	mu      sync.Mutex
	v       map[string]int64
	batches atomic.Int64
	locked  atomic.Int64
	hold    chan struct{}
	entered chan struct{}
	fail    error
}

func newMem(vals map[string]int64) *memStore { return &memStore{v: vals} }

func (m *memStore) TryAdd(ctx context.Context, key string, b Batch, floor int64) (int64, bool, error) {
	m.batches.Add(1)
	if h := m.hold; h != nil {
		m.hold = nil
		m.entered <- struct{}{}
		select {
		case <-h:
		case <-ctx.Done():
			return 0, false, &concurkit.AmbiguousCommitError{Err: ctx.Err()}
		}
	}
	if m.fail != nil {
		return 0, false, m.fail
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.v[key]
	if !ok {
		return 0, false, nil
	}
	_, lowOK := add(v, b.Low)
	_, highOK := add(v, b.High)
	if !lowOK || !highOK || b.Checked && !fits(v, b.Low, floor) {
		return 0, false, nil
	}
	s, _ := add(v, b.Delta)
	m.v[key] = s
	return s, true, nil
}

func (m *memStore) Locked(_ context.Context, key string, plan func(int64) int64) error {
	m.locked.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.v[key]
	if !ok {
		return ErrNotFound
	}
	m.v[key] = plan(v)
	return nil
}

func (m *memStore) get(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v[key]
}

// holdNext makes the next batch wait until the returned func is called.
func (m *memStore) holdNext() (entered <-chan struct{}, release func()) {
	h, e := make(chan struct{}), make(chan struct{}, 1)
	m.hold, m.entered = h, e
	return e, func() { close(h) }
}

func newCombiner(t *testing.T, s Store[string], o *Options) *Combiner[string] {
	t.Helper()
	c, err := NewCombiner(s, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

type result struct {
	v   int64
	err error
}

// begin starts Add(key, delta).
func begin(ctx context.Context, c *Combiner[string], key string, delta int64) <-chan result {
	out := make(chan result, 1)
	go func() {
		v, err := c.Add(ctx, key, delta)
		out <- result{v, err}
	}()
	return out
}

// enqueue starts Add(key, delta) and returns once the request is queued
// behind the batch in flight.
func enqueue(t *testing.T, ctx context.Context, c *Combiner[string], key string, delta int64) <-chan result {
	t.Helper()
	c.mu.Lock()
	n := 0
	if q := c.keys[key]; q != nil {
		n = len(q.pending)
	}
	c.mu.Unlock()
	out := begin(ctx, c, key, delta)
	for {
		c.mu.Lock()
		q := c.keys[key]
		queued := q != nil && len(q.pending) > n
		c.mu.Unlock()
		if queued {
			return out
		}
		time.Sleep(100 * time.Microsecond) // polling the queue, not timing
	}
}

// TestArrivalOrder: requests queued behind a batch go in the next one, in
// arrival order; exactly the decrements that do not fit above the floor
// are refused, each caller gets the value after its own update, and the
// whole batch is one locked transaction.
func TestArrivalOrder(t *testing.T) {
	m := newMem(map[string]int64{"k": 10})
	c := newCombiner(t, m, &Options{Floor: AtLeast(0)})
	entered, release := m.holdNext()
	first := begin(t.Context(), c, "k", -1)
	<-entered
	deltas := []int64{-5, -5, -3, +2, -1}
	var outs []<-chan result
	for _, d := range deltas {
		outs = append(outs, enqueue(t, t.Context(), c, "k", d))
	}
	release()
	if r := <-first; r.err != nil || r.v != 9 {
		t.Fatalf("first = %+v, want 9", r)
	}
	want := []result{{4, nil}, {0, ErrInsufficient}, {1, nil}, {3, nil}, {2, nil}}
	for i, o := range outs {
		if r := <-o; r.v != want[i].v || !errors.Is(r.err, want[i].err) || (want[i].err == nil) != (r.err == nil) {
			t.Errorf("request %d (delta %d) = %+v, want %+v", i, deltas[i], r, want[i])
		}
	}
	if got := m.get("k"); got != 2 {
		t.Errorf("value %d, want 2", got)
	}
	if b, l := m.batches.Load(), m.locked.Load(); b != 2 || l != 1 {
		t.Errorf("%d batches (%d locked), want 2 (1)", b, l)
	}
}

// TestFastPathValues: a batch that fits goes in one statement and each
// caller still gets its own value.
func TestFastPathValues(t *testing.T) {
	m := newMem(map[string]int64{"k": 100})
	c := newCombiner(t, m, &Options{Floor: AtLeast(0)})
	entered, release := m.holdNext()
	first := begin(t.Context(), c, "k", 1)
	<-entered
	a := enqueue(t, t.Context(), c, "k", -30)
	b := enqueue(t, t.Context(), c, "k", 5)
	d := enqueue(t, t.Context(), c, "k", -70)
	release()
	for i, tc := range []struct {
		ch   <-chan result
		want int64
	}{{first, 101}, {a, 71}, {b, 76}, {d, 6}} {
		if r := <-tc.ch; r.err != nil || r.v != tc.want {
			t.Errorf("request %d = %+v, want %d", i, r, tc.want)
		}
	}
	if l := m.locked.Load(); l != 0 {
		t.Errorf("%d locked batches, want 0", l)
	}
}

// TestCancelWhileWaiting: a caller that leaves before its request is sent
// is told it was not applied, and it is not.
func TestCancelWhileWaiting(t *testing.T) {
	m := newMem(map[string]int64{"k": 0})
	c := newCombiner(t, m, nil)
	entered, release := m.holdNext()
	first := begin(t.Context(), c, "k", 1)
	<-entered
	ctx, cancel := context.WithCancel(t.Context())
	gone := enqueue(t, ctx, c, "k", 100)
	kept := enqueue(t, t.Context(), c, "k", 10)
	cancel()
	r := <-gone
	if !errors.Is(r.err, ErrNotApplied) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %+v, want ErrNotApplied and context.Canceled", r)
	}
	release()
	if r := <-first; r.v != 1 {
		t.Errorf("first = %+v", r)
	}
	if r := <-kept; r.err != nil || r.v != 11 {
		t.Errorf("kept = %+v, want 11", r)
	}
	if got := m.get("k"); got != 11 {
		t.Errorf("value %d, want 11 (the cancelled request applied?)", got)
	}
}

// TestCancelInFlight: a caller that leaves while its batch is at the
// database is told the outcome is unknown, and the batch still commits.
func TestCancelInFlight(t *testing.T) {
	m := newMem(map[string]int64{"k": 0})
	c := newCombiner(t, m, nil)
	entered, release := m.holdNext()
	ctx, cancel := context.WithCancel(t.Context())
	out := begin(ctx, c, "k", 7)
	<-entered
	cancel()
	r := <-out
	var amb *concurkit.AmbiguousCommitError
	if !errors.As(r.err, &amb) || !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, concurkit.ErrOutcomeUnknown) {
		t.Fatalf("in-flight caller: %+v, want an AmbiguousCommitError matching context.Canceled", r)
	}
	release()
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := m.get("k"); got != 7 {
		t.Errorf("value %d, want 7", got)
	}
}

// TestOverflow: arithmetic at the edges of int64. A request that would
// leave the range is refused alone; deltas whose sum overflows go in
// separate batches.
func TestOverflow(t *testing.T) {
	m := newMem(map[string]int64{"hi": math.MaxInt64 - 1, "lo": math.MinInt64 + 1, "z": 0})
	c := newCombiner(t, m, nil)
	ctx := t.Context()
	if v, err := c.Add(ctx, "hi", 1); err != nil || v != math.MaxInt64 {
		t.Errorf("MaxInt64-1 + 1 = %d, %v", v, err)
	}
	if _, err := c.Add(ctx, "hi", 1); !errors.Is(err, ErrOverflow) {
		t.Errorf("MaxInt64 + 1: %v, want ErrOverflow", err)
	}
	if v, err := c.Add(ctx, "lo", -1); err != nil || v != math.MinInt64 {
		t.Errorf("MinInt64+1 - 1 = %d, %v", v, err)
	}
	if _, err := c.Add(ctx, "lo", math.MinInt64); !errors.Is(err, ErrOverflow) {
		t.Errorf("MinInt64 + MinInt64: %v, want ErrOverflow", err)
	}
	entered, release := m.holdNext()
	first := begin(ctx, c, "z", 0)
	<-entered
	a := enqueue(t, ctx, c, "z", math.MaxInt64)
	b := enqueue(t, ctx, c, "z", math.MaxInt64)
	d := enqueue(t, ctx, c, "z", math.MinInt64)
	release()
	<-first
	ra, rb, rd := <-a, <-b, <-d
	if ra.err != nil || ra.v != math.MaxInt64 || !errors.Is(rb.err, ErrOverflow) || rd.err != nil || rd.v != -1 {
		t.Errorf("MaxInt64, MaxInt64, MinInt64 from 0: %+v %+v %+v, want MaxInt64, ErrOverflow, -1", ra, rb, rd)
	}
}

// TestStoreErrorFailsBatch: an error from the store reaches every request
// of the batch, and none of them is retried.
func TestStoreErrorFailsBatch(t *testing.T) {
	boom := errors.New("boom")
	m := newMem(map[string]int64{"k": 0})
	c := newCombiner(t, m, nil)
	entered, release := m.holdNext()
	first := begin(t.Context(), c, "k", 1)
	<-entered
	m.fail = boom
	a, b := enqueue(t, t.Context(), c, "k", 1), enqueue(t, t.Context(), c, "k", 2)
	release()
	<-first
	for _, ch := range []<-chan result{a, b} {
		if r := <-ch; !errors.Is(r.err, boom) {
			t.Errorf("%+v, want boom", r)
		}
	}
	if n := m.batches.Load(); n != 2 {
		t.Errorf("%d batches, want 2 (a failed batch retried?)", n)
	}
	m.fail = nil
	if _, err := c.Add(t.Context(), "missing", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key: %v", err)
	}
}

// TestClose: Close waits for the queued requests; Add after it is
// ErrClosed; a Close whose ctx ends cancels the batch at the database.
func TestClose(t *testing.T) {
	m := newMem(map[string]int64{"k": 0})
	c, err := NewCombiner[string](m, nil)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := m.holdNext()
	out := begin(t.Context(), c, "k", 1)
	<-entered
	ctx, cancel := context.WithCancel(t.Context())
	closed := make(chan error, 1)
	go func() { closed <- c.Close(ctx) }()
	for {
		c.mu.Lock()
		closing := c.closed
		c.mu.Unlock()
		if closing {
			break
		}
		time.Sleep(100 * time.Microsecond) // polling until Close has run
	}
	if _, err := c.Add(t.Context(), "k", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: %v, want ErrClosed", err)
	}
	cancel()
	if err := <-closed; !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want context.Canceled", err)
	}
	if r := <-out; !errors.Is(r.err, concurkit.ErrOutcomeUnknown) {
		t.Errorf("the batch Close cancelled: %+v, want outcome unknown", r)
	}
	release()
	if err := c.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	var typedNil *memStore
	for name, f := range map[string]func() error{
		"nil store":      func() error { _, err := NewCombiner[string](nil, nil); return err },
		"typed-nil":      func() error { _, err := NewCombiner[string](typedNil, nil); return err },
		"negative batch": func() error { _, err := NewCombiner[string](newMem(nil), &Options{MaxBatch: -1}); return err },
		"negative timeout": func() error {
			_, err := NewCombiner[string](newMem(nil), &Options{BatchTimeout: -time.Second})
			return err
		},
		"empty table":  func() error { _, _, _, err := Table{}.Quote(quoteTest); return err },
		"same columns": func() error { _, _, _, err := Table{Name: "t", KeyColumn: "v"}.Quote(quoteTest); return err },
	} {
		if err := f(); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	c := newCombiner(t, newMem(map[string]int64{"k": 0}), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Add(ctx, "k", 1); !errors.Is(err, ErrNotApplied) || !errors.Is(err, context.Canceled) {
		t.Errorf("Add with a done ctx: %v", err)
	}
}

func quoteTest(parts ...string) (string, error) {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += "."
		}
		out += `"` + p + `"`
	}
	return out, nil
}

// TestStockExact: 64 goroutines take 1 from a stock of 1,000 until it is
// gone: exactly 1,000 succeed, the value never goes below the floor, and
// the batches are far fewer than the requests.
func TestStockExact(t *testing.T) {
	m := newMem(map[string]int64{"stock": 1000})
	c := newCombiner(t, m, &Options{Floor: AtLeast(0)})
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 40 {
				v, err := c.Add(t.Context(), "stock", -1)
				switch {
				case err == nil && v >= 0:
					ok.Add(1)
				case errors.Is(err, ErrInsufficient):
					refused.Add(1)
				default:
					t.Errorf("Add = %d, %v", v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1000 || refused.Load() != 64*40-1000 || m.get("stock") != 0 {
		t.Errorf("%d taken, %d refused, stock %d; want 1000, %d, 0", ok.Load(), refused.Load(), m.get("stock"), 64*40-1000)
	}
	t.Logf("%d requests in %d batches", 64*40, m.batches.Load())
}

// FuzzFits checks fits and add against math/big.
func FuzzFits(f *testing.F) {
	for _, s := range [][3]int64{{0, -1, 0}, {math.MaxInt64, math.MinInt64, 0}, {math.MinInt64, -1, math.MinInt64}, {5, -5, 0}, {-3, 1, 0}, {math.MaxInt64, math.MinInt64, -1}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, v, d, floor int64) {
		sum := new(big.Int).Add(big.NewInt(v), big.NewInt(d))
		want := d >= 0 || sum.Cmp(big.NewInt(floor)) >= 0
		if got := fits(v, d, floor); got != want {
			t.Errorf("fits(%d, %d, %d) = %v, want %v", v, d, floor, got, want)
		}
		s, ok := add(v, d)
		if ok != sum.IsInt64() || ok && s != sum.Int64() {
			t.Errorf("add(%d, %d) = %d, %v; want %v", v, d, s, ok, sum)
		}
	})
}
