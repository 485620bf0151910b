package hotrow

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/concurkit/concurkit"
)

// memLedger is the reference LedgerStore: one map under a mutex. hold,
// when set, makes the next Apply wait for it (and signal entered), so a
// test can queue transfers behind a batch at the "database".
type memLedger struct {
	mu      sync.Mutex
	v       map[string]int64
	batches [][]string // the keys of each Apply
	hold    chan struct{}
	entered chan struct{}
	fail    error
}

func (m *memLedger) Apply(ctx context.Context, keys []string, plan func([]int64, []bool)) error {
	if h := m.hold; h != nil {
		m.hold = nil
		m.entered <- struct{}{}
		select {
		case <-h:
		case <-ctx.Done():
			return &concurkit.AmbiguousCommitError{Err: ctx.Err()}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches = append(m.batches, slices.Clone(keys))
	if m.fail != nil {
		return m.fail
	}
	v, found := make([]int64, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		v[i], found[i] = m.v[k]
	}
	plan(v, found)
	for i, k := range keys {
		if found[i] {
			m.v[k] = v[i]
		}
	}
	return nil
}

func (m *memLedger) holdNext() (entered <-chan struct{}, release func()) {
	h, e := make(chan struct{}), make(chan struct{}, 1)
	m.hold, m.entered = h, e
	return e, func() { close(h) }
}

func newLedger(t *testing.T, s LedgerStore[string], o *Options) *Ledger[string] {
	t.Helper()
	l, err := NewLedger(s, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

type transferResult struct {
	b   Balances
	err error
}

// queueTransfer starts l.Transfer(t) and returns once it is queued behind
// the batch in flight.
func queueTransfer(t *testing.T, ctx context.Context, l *Ledger[string], tr Transfer[string]) <-chan transferResult {
	t.Helper()
	l.mu.Lock()
	n := len(l.queue)
	l.mu.Unlock()
	out := make(chan transferResult, 1)
	go func() {
		b, err := l.Transfer(ctx, tr)
		out <- transferResult{b, err}
	}()
	for {
		l.mu.Lock()
		queued := len(l.queue) > n
		l.mu.Unlock()
		if queued {
			return out
		}
		select {
		case r := <-out:
			t.Fatalf("%+v answered before it queued: %+v", tr, r)
		default:
		}
		runtime.Gosched()
	}
}

// TestLedgerBatchInArrivalOrder: transfers queued behind a batch go in one
// batch, which locks the accounts they touch (sorted, once each), and are
// applied in arrival order, each with its own overdraft check.
func TestLedgerBatchInArrivalOrder(t *testing.T) {
	m := &memLedger{v: map[string]int64{"a": 10, "b": 0, "c": 5, "max": math.MaxInt64}}
	l := newLedger(t, m, nil)
	ctx := t.Context()
	entered, release := m.holdNext()
	first := make(chan transferResult, 1)
	go func() {
		b, err := l.Transfer(ctx, Transfer[string]{From: "c", To: "a", Amount: 1})
		first <- transferResult{b, err}
	}()
	<-entered
	trs := []struct {
		tr   Transfer[string]
		want Balances
		err  error
	}{
		{Transfer[string]{From: "a", To: "b", Amount: 7}, Balances{From: 4, To: 7}, nil},
		{Transfer[string]{From: "a", To: "b", Amount: 5}, Balances{}, ErrInsufficient}, // 4 left
		{Transfer[string]{From: "b", To: "c", Amount: 7}, Balances{From: 0, To: 11}, nil},
		{Transfer[string]{From: "c", To: "nobody", Amount: 1}, Balances{}, ErrNotFound},
		{Transfer[string]{From: "c", To: "max", Amount: 1}, Balances{}, ErrOverflow},
		{Transfer[string]{From: "a", To: "c", Amount: 4}, Balances{From: 0, To: 15}, nil},
	}
	outs := make([]<-chan transferResult, len(trs))
	for i, tc := range trs {
		outs[i] = queueTransfer(t, ctx, l, tc.tr)
	}
	release()
	if r := <-first; r.err != nil || r.b != (Balances{From: 4, To: 11}) {
		t.Fatalf("first: %+v", r)
	}
	for i, tc := range trs {
		r := <-outs[i]
		if r.b != tc.want || !errors.Is(r.err, tc.err) || (tc.err == nil) != (r.err == nil) {
			t.Errorf("%+v: %+v, %v; want %+v, %v", tc.tr, r.b, r.err, tc.want, tc.err)
		}
	}
	if want := [][]string{{"a", "c"}, {"a", "b", "c", "max", "nobody"}}; !slices.EqualFunc(m.batches, want, slices.Equal) {
		t.Errorf("batches locked %v, want %v", m.batches, want)
	}
	if got := m.v; got["a"] != 0 || got["b"] != 0 || got["c"] != 15 || got["max"] != math.MaxInt64 {
		t.Errorf("balances %v", got)
	}
}

// TestLedgerFloor: a nil Floor is 0; AtLeast(MinInt64) lets a balance go
// negative down to the int64 minimum and no further.
func TestLedgerFloor(t *testing.T) {
	ctx := t.Context()
	m := &memLedger{v: map[string]int64{"a": 0, "b": 0}}
	if _, err := newLedger(t, m, nil).Transfer(ctx, Transfer[string]{From: "a", To: "b", Amount: 1}); !errors.Is(err, ErrInsufficient) {
		t.Errorf("nil floor, overdraft: %v, want ErrInsufficient", err)
	}
	l := newLedger(t, m, &Options{Floor: AtLeast(math.MinInt64)})
	b, err := l.Transfer(ctx, Transfer[string]{From: "a", To: "b", Amount: math.MaxInt64})
	if err != nil || b != (Balances{From: -math.MaxInt64, To: math.MaxInt64}) {
		t.Errorf("MaxInt64 overdraft: %+v, %v", b, err)
	}
	if _, err := l.Transfer(ctx, Transfer[string]{From: "a", To: "b", Amount: 2}); !errors.Is(err, ErrInsufficient) {
		t.Errorf("below MinInt64: %v, want ErrInsufficient", err)
	}
	if b, err := l.Transfer(ctx, Transfer[string]{From: "b", To: "a", Amount: math.MaxInt64}); err != nil || b != (Balances{From: 0, To: 0}) {
		t.Errorf("back: %+v, %v", b, err)
	}
}

// TestLedgerCancel: a transfer whose caller leaves while it waits is never
// sent; one whose batch is at the database is told the outcome is unknown.
func TestLedgerCancel(t *testing.T) {
	m := &memLedger{v: map[string]int64{"a": 10, "b": 0}}
	l := newLedger(t, m, nil)
	entered, release := m.holdNext()
	inFlight, cancelInFlight := context.WithCancel(t.Context())
	first := make(chan transferResult, 1)
	go func() {
		b, err := l.Transfer(inFlight, Transfer[string]{From: "a", To: "b", Amount: 1})
		first <- transferResult{b, err}
	}()
	<-entered
	waiting, cancelWaiting := context.WithCancel(t.Context())
	queued := queueTransfer(t, waiting, l, Transfer[string]{From: "a", To: "b", Amount: 2})
	cancelWaiting()
	if r := <-queued; !errors.Is(r.err, ErrNotApplied) || !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled while waiting: %v, want ErrNotApplied and Canceled", r.err)
	}
	cancelInFlight()
	if r := <-first; !errors.Is(r.err, concurkit.ErrOutcomeUnknown) {
		t.Errorf("cancelled in flight: %v, want outcome unknown", r.err)
	}
	release()
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The first batch applied (the store finished it); the cancelled
	// waiter never reached a batch.
	if m.v["a"] != 9 || m.v["b"] != 1 || len(m.batches) != 1 {
		t.Errorf("balances %v after %d batches; want a 9, b 1 after 1", m.v, len(m.batches))
	}
	if _, err := l.Transfer(t.Context(), Transfer[string]{From: "a", To: "b", Amount: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// TestLedgerStoreError: a batch the store fails fails every transfer in
// it, with the store's error, and applies none.
func TestLedgerStoreError(t *testing.T) {
	boom := errors.New("boom")
	m := &memLedger{v: map[string]int64{"a": 10, "b": 0}, fail: boom}
	l := newLedger(t, m, nil)
	if _, err := l.Transfer(t.Context(), Transfer[string]{From: "a", To: "b", Amount: 1}); !errors.Is(err, boom) {
		t.Errorf("%v, want the store's error", err)
	}
	if m.v["a"] != 10 {
		t.Errorf("a = %d after a failed batch", m.v["a"])
	}
}

func TestLedgerBadInput(t *testing.T) {
	var nilStore *memLedger
	m := &memLedger{v: map[string]int64{"a": 1}}
	l := newLedger(t, m, nil)
	ctx := t.Context()
	for name, err := range map[string]error{
		"nil store":       func() error { _, err := NewLedger[string](nil, nil); return err }(),
		"typed-nil store": func() error { _, err := NewLedger[string](nilStore, nil); return err }(),
		"negative batch":  func() error { _, err := NewLedger[string](m, &Options{MaxBatch: -1}); return err }(),
		"zero amount":     func() error { _, err := l.Transfer(ctx, Transfer[string]{From: "a", To: "b"}); return err }(),
		"negative amount": func() error {
			_, err := l.Transfer(ctx, Transfer[string]{From: "a", To: "b", Amount: math.MinInt64})
			return err
		}(),
		"to itself": func() error { _, err := l.Transfer(ctx, Transfer[string]{From: "a", To: "a", Amount: 1}); return err }(),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if len(m.batches) != 0 {
		t.Errorf("bad input reached the store: %v", m.batches)
	}
}
