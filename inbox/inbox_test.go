package inbox_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/inbox"
)

var errHandler = errors.New("handler failed")

// TestHandleOnce: the first delivery runs the handler, a duplicate does
// not; a failed handler records nothing, so the redelivery runs it; the
// consumer name scopes ids; ids are compared byte for byte.
func TestHandleOnce(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		c := e.open(t, nil)
		mustHandle := func(consumer, id string, want bool) {
			t.Helper()
			got, err := c.handle(ctx, consumer, id, nil)
			if err != nil || got != want {
				t.Fatalf("handle(%q, %q) = %v, %v; want %v, nil", consumer, id, got, err, want)
			}
		}
		mustHandle("billing", "m1", true)
		mustHandle("billing", "m1", false)
		mustHandle("billing", "m1", false)
		// Another consumer records the same id for itself.
		mustHandle("shipping", "m1", true)
		mustHandle("shipping", "m1", false)

		// A failing handler: its effect rolls back with the record.
		got, err := c.handle(ctx, "billing", "m2", func() error { return errHandler })
		if !errors.Is(err, errHandler) || got {
			t.Fatalf("failing handler: %v, %v; want false, errHandler", got, err)
		}
		mustHandle("billing", "m2", true)
		mustHandle("billing", "m2", false)

		// Byte-for-byte ids: case, trailing space, a 255-byte UTF-8 id.
		long := strings.Repeat("€", 85) // 255 bytes
		for _, id := range []string{"a", "A", "a ", long} {
			mustHandle("billing", id, true)
		}
		for _, id := range []string{"a", "A", "a ", long} {
			mustHandle("billing", id, false)
		}

		want := map[string]int64{"m1": 2, "m2": 1, "a": 1, "A": 1, "a ": 1, long: 1}
		got2 := e.effects(t)
		if len(got2) != len(want) {
			t.Fatalf("effects %v, want %v", got2, want)
		}
		for id, n := range want {
			if got2[id] != n {
				t.Errorf("effect of %q applied %d times, want %d", id, got2[id], n)
			}
		}
	})
}

// TestHandleInCallerTransaction: in a transaction the caller opened, the
// record commits or rolls back with it.
func TestHandleInCallerTransaction(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		if ok, err := e.inCallerTx(t, "m1", false); !ok || err != nil {
			t.Fatalf("in a rolled-back tx: %v, %v", ok, err)
		}
		if ok, err := e.inCallerTx(t, "m1", true); !ok || err != nil {
			t.Fatalf("after the rollback the id is new again: %v, %v", ok, err)
		}
		if ok, err := e.inCallerTx(t, "m1", true); ok || err != nil {
			t.Fatalf("after the commit: %v, %v; want a duplicate", ok, err)
		}
		if got := e.effects(t)["m1"]; got != 1 {
			t.Fatalf("effect applied %d times, want 1", got)
		}
	})
}

// TestHandlerFailsInCallerTransaction: in a transaction the caller opened,
// a handler that fails (or panics) leaves nothing of the message in it —
// neither the id nor the handler's writes (a savepoint) — so the caller
// may still commit its own work, and the redelivery runs the handler. The
// same for HandleSequence: the sequence does not advance.
func TestHandlerFailsInCallerTransaction(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		e.callerTx(t, true, func(c consumer) {
			if ok, err := c.handle(ctx, "billing", "m1", func() error { return errHandler }); ok || !errors.Is(err, errHandler) {
				t.Errorf("failing handler: %v, %v", ok, err)
			}
			func() {
				defer func() {
					if p := recover(); p != "boom" {
						t.Errorf("panicking handler: recovered %v", p)
					}
				}()
				_, _ = c.handle(ctx, "billing", "m2", func() error { panic("boom") })
			}()
			if r, err := c.handleSeq(ctx, "billing", "p", 1, func() error { return errHandler }); r.Applied || !errors.Is(err, errHandler) {
				t.Errorf("failing sequence handler: %+v, %v", r, err)
			}
			// The transaction is still usable: a message that succeeds
			// commits with it.
			if ok, err := c.handle(ctx, "billing", "m3", nil); !ok || err != nil {
				t.Errorf("handler after the failures: %v, %v", ok, err)
			}
		})
		c := e.open(t, nil)
		for _, id := range []string{"m1", "m2"} {
			if ok, err := c.handle(ctx, "billing", id, nil); !ok || err != nil {
				t.Errorf("redelivery of %s after its handler failed in the caller's committed tx: %v, %v (want handled: the message would be lost)", id, ok, err)
			}
		}
		if ok, err := c.handle(ctx, "billing", "m3", nil); ok || err != nil {
			t.Errorf("redelivery of m3: %v, %v; want a duplicate", ok, err)
		}
		if r, err := c.handleSeq(ctx, "billing", "p", 1, nil); !r.Applied || err != nil {
			t.Errorf("redelivery of sequence 1: %+v, %v; want applied", r, err)
		}
		if got := e.effects(t); got["m1"] != 1 || got["m2"] != 1 || got["m3"] != 1 {
			t.Errorf("effects %v, want m1, m2, m3 once each", got)
		}
		if got := e.seqLog(t, "p"); !slices.Equal(got, []int64{1}) {
			t.Errorf("sequence log %v, want [1]", got)
		}
	})
}

// TestConcurrentDuplicatesWait forces the race: the first delivery holds
// its transaction open inside the handler until every other delivery of
// the same id (on connections of their own) is blocked on the id's key;
// then it commits (they all see a duplicate) or fails (exactly one of them
// runs the handler).
func TestConcurrentDuplicatesWait(t *testing.T) {
	const waiters = 7
	for _, tc := range []struct {
		name      string
		firstErr  error
		wantFirst bool
	}{
		{"first commits", nil, true},
		{"first fails", errHandler, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not on Galera: a delivery on another node does not wait on
			// the key there; TestGaleraConcurrentDeliveries forces that race.
			eachExcept(t, "galera", func(t *testing.T, e env) {
				ctx := t.Context()
				first, _ := e.session(t, nil)
				var sessions []consumer
				var sids []int64
				for range waiters {
					c, id := e.session(t, nil)
					sessions, sids = append(sessions, c), append(sids, id)
				}
				inside := make(chan struct{})
				release := make(chan struct{})
				firstDone := make(chan error, 1)
				go func() {
					ok, err := first.handle(ctx, "billing", "hot", func() error {
						close(inside)
						<-release
						return tc.firstErr
					})
					if ok != tc.wantFirst {
						err = errors.Join(err, errors.New("first: unexpected processed flag"))
					}
					firstDone <- err
				}()
				<-inside

				var processed atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, waiters)
				for _, c := range sessions {
					wg.Go(func() {
						ok, err := c.handle(ctx, "billing", "hot", nil)
						if err != nil {
							errs <- err
						}
						if ok {
							processed.Add(1)
						}
					})
				}
				// Every waiter is queued on the key before the first ends.
				deadline := time.Now().Add(20 * time.Second)
				for e.waiting(t, sids) < waiters {
					if time.Now().After(deadline) {
						t.Fatalf("only %d of %d deliveries wait on the key", e.waiting(t, sids), waiters)
					}
					time.Sleep(5 * time.Millisecond)
				}
				close(release)
				if err := <-firstDone; !errors.Is(err, tc.firstErr) {
					t.Fatalf("first delivery: %v", err)
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Errorf("waiter: %v", err)
				}
				wantOthers := int64(0)
				if tc.firstErr != nil {
					wantOthers = 1
				}
				if processed.Load() != wantOthers {
					t.Errorf("%d waiters ran the handler, want %d", processed.Load(), wantOthers)
				}
				if got := e.effects(t)["hot"]; got != 1 {
					t.Errorf("effect applied %d times, want 1", got)
				}
			})
		})
	}
}

// TestDeliveredManyTimes is the figure: 1,000 messages delivered
// 1–3 times each, shuffled, to 8 consumers on separate connections: each
// effect is applied exactly once and exactly 1,000 deliveries report
// processed.
func TestDeliveredManyTimes(t *testing.T) {
	const messages, consumers = 1000, 8
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed))
		var deliveries []string
		for _, id := range ids("msg", messages) {
			for range 1 + rng.IntN(3) {
				deliveries = append(deliveries, id)
			}
		}
		rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
		queue := make(chan string, len(deliveries))
		for _, d := range deliveries {
			queue <- d
		}
		close(queue)

		var processed, duplicates atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, consumers)
		start := time.Now()
		for range consumers {
			c, _ := e.session(t, nil)
			wg.Go(func() {
				for id := range queue {
					ok, err := c.handle(ctx, "billing", id, nil)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						processed.Add(1)
					} else {
						duplicates.Add(1)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d deliveries of %d messages by %d consumers in %v: %d processed, %d duplicates",
			len(deliveries), messages, consumers, time.Since(start).Round(time.Millisecond), processed.Load(), duplicates.Load())
		if processed.Load() != messages || processed.Load()+duplicates.Load() != int64(len(deliveries)) {
			t.Errorf("processed %d, duplicates %d; want %d and %d", processed.Load(), duplicates.Load(), messages, len(deliveries)-messages)
		}
		effects := e.effects(t)
		if len(effects) != messages {
			t.Errorf("%d messages have effects, want %d", len(effects), messages)
		}
		for id, n := range effects {
			if n != 1 {
				t.Errorf("effect of %s applied %d times", id, n)
			}
		}
		if n := e.count(t, "concurkit_inbox"); n != messages {
			t.Errorf("%d inbox entries, want %d", n, messages)
		}
	})
}

// TestWindowAndReap: with a dedup window and an injected clock, an id is a
// duplicate until Window has passed since it was recorded, then processed
// again; Reap deletes exactly the expired entries, in batches.
func TestWindowAndReap(t *testing.T) {
	const window = 5 * time.Minute
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		clock := newClock()
		t0 := clock.Now()
		c := e.open(t, &inbox.Config{Window: window, Now: clock.Now, ReapBatch: 3})
		check := func(id string, want bool) {
			t.Helper()
			got, err := c.handle(ctx, "billing", id, nil)
			if err != nil || got != want {
				t.Fatalf("at +%v: handle(%q) = %v, %v; want %v", clock.Now().Sub(t0), id, got, err, want)
			}
		}
		reap := func(want int64) {
			t.Helper()
			got, err := c.reap(ctx)
			if err != nil || got != want {
				t.Fatalf("at +%v: Reap = %d, %v; want %d", clock.Now().Sub(t0), got, err, want)
			}
		}
		for _, id := range ids("m", 10) {
			check(id, true)
		}
		clock.set(t0.Add(time.Minute))
		check("n1", true)
		check("n2", true)
		check("m-0000", false)
		reap(0) // nothing has expired yet

		clock.set(t0.Add(window - time.Microsecond))
		check("m-0000", false) // one microsecond short of the window
		clock.set(t0.Add(window))
		check("m-0000", true) // the window has passed: processed again
		check("m-0000", false)
		check("n1", false)
		reap(9) // m-0001 … m-0009, three batches of 3 and an empty one
		if n := e.count(t, "concurkit_inbox"); n != 3 {
			t.Fatalf("%d entries left, want 3 (m-0000, n1, n2)", n)
		}
		check("m-0001", true) // reaped: new again
		clock.set(t0.Add(time.Minute + window))
		reap(2) // n1, n2
		check("n2", true)

		eff := e.effects(t)
		for id, want := range map[string]int64{"m-0000": 2, "m-0001": 2, "m-0002": 1, "n1": 1, "n2": 2} {
			if eff[id] != want {
				t.Errorf("effect of %s applied %d times, want %d", id, eff[id], want)
			}
		}
	})
}

// TestSequences: exact outcomes of HandleSequence under both gap policies.
func TestSequences(t *testing.T) {
	type step struct {
		seq      int64
		applied  bool
		last     int64
		gap      [2]int64 // From, To; zero = no gap
		handlerr bool     // the handler fails
	}
	for _, tc := range []struct {
		policy inbox.GapPolicy
		steps  []step
		log    []int64
	}{
		{inbox.RefuseGaps, []step{
			{seq: 1, applied: true, last: 0},
			{seq: 1, last: 1},                // duplicate
			{seq: 2, applied: true, last: 1}, // next
			{seq: 4, last: 2, gap: [2]int64{3, 3}},
			{seq: 6, last: 2, gap: [2]int64{3, 5}},
			{seq: 3, applied: true, last: 2},
			{seq: 4, applied: true, last: 3}, // redelivered after the gap closed
			{seq: 2, last: 4},                // older: dropped
			{seq: 5, last: 4, handlerr: true},
			{seq: 5, applied: true, last: 4}, // the failed one was not recorded
			{seq: 6, applied: true, last: 5},
		}, []int64{1, 2, 3, 4, 5, 6}},
		{inbox.ApplyGaps, []step{
			{seq: 1, applied: true, last: 0},
			{seq: 1, last: 1},
			{seq: 2, applied: true, last: 1},
			{seq: 4, applied: true, last: 2, gap: [2]int64{3, 3}},
			{seq: 3, last: 4}, // late: dropped as older
			{seq: 5, applied: true, last: 4},
			{seq: 9, applied: true, last: 5, gap: [2]int64{6, 8}},
			{seq: 6, last: 9},
		}, []int64{1, 2, 4, 5, 9}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			each(t, func(t *testing.T, e env) {
				ctx := t.Context()
				c := e.open(t, &inbox.Config{Gaps: tc.policy})
				for i, s := range tc.steps {
					var hook func() error
					if s.handlerr {
						hook = func() error { return errHandler }
					}
					res, err := c.handleSeq(ctx, "billing", "orders-1", s.seq, hook)
					if s.handlerr {
						if !errors.Is(err, errHandler) || res != (inbox.SeqResult{}) {
							t.Fatalf("step %d (seq %d): %+v, %v; want the handler's error", i, s.seq, res, err)
						}
						continue
					}
					var wantGap *inbox.GapError
					if s.gap != [2]int64{} {
						wantGap = &inbox.GapError{Consumer: "billing", Producer: "orders-1", From: s.gap[0], To: s.gap[1]}
					}
					if res.Applied != s.applied || res.Last != s.last || !sameGap(res.Gap, wantGap) {
						t.Fatalf("step %d (seq %d): %+v (gap %v); want applied %v, last %d, gap %v", i, s.seq, res, res.Gap, s.applied, s.last, wantGap)
					}
					refused := wantGap != nil && tc.policy == inbox.RefuseGaps
					var ge *inbox.GapError
					switch {
					case refused && (!errors.Is(err, inbox.ErrSequenceGap) || !errors.As(err, &ge) || !sameGap(ge, wantGap)):
						t.Fatalf("step %d (seq %d): error %v, want the gap %v", i, s.seq, err, wantGap)
					case !refused && err != nil:
						t.Fatalf("step %d (seq %d): %v", i, s.seq, err)
					}
					if res.Duplicate() != (!s.applied && wantGap == nil) {
						t.Fatalf("step %d: Duplicate() = %v", i, res.Duplicate())
					}
				}
				if got := e.seqLog(t, "orders-1"); !equal(got, tc.log) {
					t.Fatalf("applied %v, want %v", got, tc.log)
				}
				// Producers and consumers are independent.
				res, err := c.handleSeq(ctx, "billing", "orders-2", 1, nil)
				if err != nil || !res.Applied || res.Last != 0 {
					t.Fatalf("another producer: %+v, %v", res, err)
				}
				res, err = c.handleSeq(ctx, "audit", "orders-1", 1, nil)
				if err != nil || !res.Applied || res.Last != 0 {
					t.Fatalf("another consumer: %+v, %v", res, err)
				}
				// A new producer starting above 1 has a gap from 1.
				res, err = c.handleSeq(ctx, "billing", "orders-3", 3, nil)
				if g := res.Gap; g == nil || g.From != 1 || g.To != 2 {
					t.Fatalf("new producer at 3: %+v, %v; want gap 1..2", res, err)
				}
			})
		})
	}
}

func sameGap(a, b *inbox.GapError) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSequencesConcurrent: three producers' messages 1..100, each
// delivered once or twice with neighbours swapped, handled by 8 consumers
// on separate connections; a refused message (gap) goes back to the end of
// the queue, as a nack would. Every producer's effects are applied once
// each, in sequence order.
func TestSequencesConcurrent(t *testing.T) {
	const producers, perProducer, consumers = 3, 100, 8
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed))
		type delivery struct {
			producer string
			seq      int64
		}
		var list []delivery
		for s := int64(1); s <= perProducer; s++ {
			for p := range producers {
				d := delivery{"p" + string(rune('A'+p)), s}
				list = append(list, d)
				if rng.IntN(2) == 0 {
					list = append(list, d)
				}
			}
		}
		for i := 1; i < len(list); i++ { // local reordering
			if rng.IntN(3) == 0 {
				list[i-1], list[i] = list[i], list[i-1]
			}
		}
		queue := make(chan delivery, len(list))
		for _, d := range list {
			queue <- d
		}
		var outstanding atomic.Int64
		outstanding.Store(int64(len(list)))
		var applied, dups, refusals atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, consumers)
		for range consumers {
			c, _ := e.session(t, nil)
			wg.Go(func() {
				for d := range queue {
					res, err := c.handleSeq(ctx, "billing", d.producer, d.seq, nil)
					switch {
					case errors.Is(err, inbox.ErrSequenceGap):
						refusals.Add(1)
						queue <- d // nack: delivered again later
						continue
					case err != nil:
						errs <- err
						return
					case res.Applied:
						applied.Add(1)
					default:
						dups.Add(1)
					}
					if outstanding.Add(-1) == 0 {
						close(queue)
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(60 * time.Second):
			t.Fatalf("stuck: %d deliveries outstanding", outstanding.Load())
		}
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d deliveries: %d applied, %d duplicates, %d refusals (gaps)", len(list), applied.Load(), dups.Load(), refusals.Load())
		if applied.Load() != producers*perProducer {
			t.Errorf("applied %d, want %d", applied.Load(), producers*perProducer)
		}
		want := make([]int64, perProducer)
		for i := range want {
			want[i] = int64(i + 1)
		}
		for p := range producers {
			name := "p" + string(rune('A'+p))
			if got := e.seqLog(t, name); !equal(got, want) {
				t.Errorf("producer %s applied %v, want 1..%d in order", name, got, perProducer)
			}
		}
	})
}

// TestCancelled: a handler whose context ends rolls back; the id stays
// unrecorded and the error matches the context's.
func TestCancelled(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		c := e.open(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		ok, err := c.handle(ctx, "billing", "m1", func() error { cancel(); return ctx.Err() })
		if ok || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled handler: %v, %v", ok, err)
		}
		if ok, err := c.handle(t.Context(), "billing", "m1", nil); !ok || err != nil {
			t.Fatalf("redelivery: %v, %v", ok, err)
		}
		if got := e.effects(t)["m1"]; got != 1 {
			t.Fatalf("effect applied %d times", got)
		}
	})
}
