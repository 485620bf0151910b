package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/outbox"
)

// recorder is a Publisher that keeps what it was given.
type recorder struct {
	mu      sync.Mutex
	batches [][]outbox.Message
	count   map[string]int
}

func (r *recorder) Publish(_ context.Context, msgs []outbox.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, slices.Clone(msgs))
	if r.count == nil {
		r.count = map[string]int{}
	}
	for _, m := range msgs {
		r.count[m.ID]++
	}
	return nil
}

func (r *recorder) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.count)
}

func newRelay(t testing.TB, src outbox.Source, pub outbox.Publisher, cfg *outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(src, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAddAndRelay: a committed business transaction's events are
// published, once, in insertion order, with every field as written; a
// rolled-back one's never are.
func TestAddAndRelay(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		clock := newClock()
		cfg := &outbox.Config{Now: clock.Now}
		msgs := []outbox.Message{
			{Topic: "orders", Key: "o1", Payload: []byte("one"), Headers: map[string]string{"traceparent": "00-abc-def-01", "ü": "ß"}},
			{ID: "order-2-created", Topic: "orders", Payload: []byte{0, 1, 2, 255}},
			{Topic: "audit"}, // no key, payload or headers
		}
		var want []outbox.Message
		for i, m := range msgs {
			id, err := e.order(ctx, cfg, fmt.Sprint("o", i), m, true)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != "" && id != m.ID || len(id) != 36 && m.ID == "" {
				t.Fatalf("Add returned ID %q for %+v", id, m)
			}
			m.ID, m.CreatedAt = id, clock.Now()
			if m.Payload == nil {
				m.Payload = []byte{}
			}
			want = append(want, m)
		}
		if _, err := e.order(ctx, cfg, "rolled-back", outbox.Message{Topic: "orders"}, false); err != nil {
			t.Fatal(err)
		}
		s := e.store(t, cfg)
		if n, err := s.Pending(ctx); n != 3 || err != nil {
			t.Fatalf("Pending = %d, %v; want 3", n, err)
		}
		rec := &recorder{}
		relay := newRelay(t, s, rec, nil)
		if n, err := relay.Once(ctx); n != 3 || err != nil {
			t.Fatalf("Once = %d, %v; want 3", n, err)
		}
		if n, err := relay.Once(ctx); n != 0 || err != nil {
			t.Fatalf("second Once = %d, %v; want 0", n, err)
		}
		if len(rec.batches) != 1 {
			t.Fatalf("%d batches, want 1", len(rec.batches))
		}
		got := rec.batches[0]
		for i := range want {
			g, w := got[i], want[i]
			if g.ID != w.ID || g.Topic != w.Topic || g.Key != w.Key || string(g.Payload) != string(w.Payload) ||
				!maps.Equal(g.Headers, w.Headers) || !g.CreatedAt.Equal(w.CreatedAt) || g.Payload == nil {
				t.Errorf("message %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
		if n, err := s.Pending(ctx); n != 0 || err != nil {
			t.Fatalf("Pending = %d, %v; want 0", n, err)
		}
		// Outside a transaction (autocommit), Add writes at once.
		if _, err := e.addAutocommit(ctx, outbox.Message{Topic: "orders"}); err != nil {
			t.Fatal(err)
		}
		if n, err := relay.Once(ctx); n != 1 || err != nil {
			t.Fatalf("Once after an autocommit Add = %d, %v", n, err)
		}
	})
}

// TestPoisonRowsDoNotStopRelay: rows written by other code (raw SQL,
// bypassing Add) whose headers are not a JSON object of strings are handed
// to the publisher flagged (Message.Malformed, with the stored bytes), in
// order with the good ones, and published with their batch: the relay is
// never stuck on them.
func TestPoisonRowsDoNotStopRelay(t *testing.T) {
	poison := map[string][]string{ // backend → headers column literals
		"postgres": {`'{"n": 1}'`, `'[1, 2]'`, `'"text"'`, `'{"a": {"b": "c"}}'`},
		"mariadb":  {`'{"n": 1}'`, `'not json'`, `'{"a": '`, `'[1, 2]'`},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			e := b.open(t)
			ctx := t.Context()
			before, err := e.addAutocommit(ctx, outbox.Message{Topic: "orders", Payload: []byte("good-1"), Headers: map[string]string{"k": "v"}})
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range poison[b.name] {
				e.exec(t, fmt.Sprintf(`INSERT INTO concurkit_outbox (message_id, topic, message_key, payload, headers, created_at)
VALUES ('poison-%d', 'orders', 'k', '', %s, CURRENT_TIMESTAMP)`, i, h))
			}
			after, err := e.addAutocommit(ctx, outbox.Message{Topic: "orders", Payload: []byte("good-2")})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			relay := newRelay(t, e.store(t, nil), rec, nil)
			want := 2 + len(poison[b.name])
			if n, err := relay.Once(ctx); n != want || err != nil {
				t.Fatalf("Once = %d, %v; want %d published (the relay must not stop on a malformed row)", n, err, want)
			}
			if n := e.unpublished(t); n != 0 {
				t.Errorf("%d rows left unpublished", n)
			}
			got := rec.batches[0]
			if got[0].ID != before || got[0].Malformed != nil || got[0].Headers["k"] != "v" ||
				got[len(got)-1].ID != after || got[len(got)-1].Malformed != nil {
				t.Errorf("good messages around the poison: %+v … %+v", got[0], got[len(got)-1])
			}
			for i, h := range poison[b.name] {
				m := got[1+i]
				var me *outbox.MalformedError
				if m.ID != fmt.Sprint("poison-", i) || m.Topic != "orders" || m.Key != "k" || m.Headers != nil ||
					!errors.Is(m.Malformed, outbox.ErrMalformedRow) || !errors.As(m.Malformed, &me) || me.Column != "headers" || len(me.Stored) == 0 {
					t.Errorf("poison row %d (headers %s): %+v", i, h, m)
				}
			}
		})
	}
}

// TestAddRefusesBadTextKeepsTransaction: a message with NUL or invalid
// UTF-8 in its topic, key or headers is refused by Add before any I/O
// (ErrInvalidMessage), so the caller's business transaction goes on and
// commits; on PostgreSQL a failed INSERT would have aborted it (SQLSTATE
// 22021, then 25P02 for every later statement). Over-long headers too.
func TestAddRefusesBadTextKeepsTransaction(t *testing.T) {
	bad := map[string]outbox.Message{
		"NUL in topic":               {Topic: "or\x00ders"},
		"NUL in key":                 {Topic: "orders", Key: "k\x00"},
		"invalid UTF-8 in topic":     {Topic: "orders\xff"},
		"invalid UTF-8 in key":       {Topic: "orders", Key: "\xc3"},
		"NUL in header name":         {Topic: "orders", Headers: map[string]string{"a\x00": "v"}},
		"NUL in header value":        {Topic: "orders", Headers: map[string]string{"a": "v\x00"}},
		"invalid UTF-8 header name":  {Topic: "orders", Headers: map[string]string{"\xff": "v"}},
		"invalid UTF-8 header value": {Topic: "orders", Headers: map[string]string{"a": "\xfe"}},
		"headers too long":           {Topic: "orders", Headers: map[string]string{"a": strings.Repeat("v", outbox.MaxHeadersLength)}},
	}
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		i := 0
		for name, m := range bad {
			if err := m.Validate(); !errors.Is(err, outbox.ErrInvalidMessage) {
				t.Errorf("%s: Validate = %v, want ErrInvalidMessage", name, err)
			}
			i++
			fnErr, txErr := e.business(ctx, fmt.Sprint("order-", i), func(add func(outbox.Message) (string, error)) error {
				_, err := add(m)
				return err
			})
			if !errors.Is(fnErr, outbox.ErrInvalidMessage) || !errors.Is(fnErr, concurkit.ErrInvalidArgument) {
				t.Errorf("%s: Add = %v, want ErrInvalidMessage", name, fnErr)
			}
			if txErr != nil {
				t.Errorf("%s: the business transaction failed after Add refused the message: %v", name, txErr)
			}
		}
		if n := e.unpublished(t); n != 0 {
			t.Errorf("%d messages stored, want none", n)
		}
		if n := len(e.query(t, "SELECT id, 0 FROM orders")); n != 2*len(bad) {
			t.Errorf("%d order rows committed, want %d", n, 2*len(bad))
		}
	})
	// The edges that are fine: every header at the limit, UTF-8 text.
	ok := outbox.Message{Topic: "ordres-ü", Key: "🦫", Headers: map[string]string{"a": strings.Repeat("v", outbox.MaxHeadersLength-1)}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(%.40v…) = %v", ok, err)
	}
}

// TestPublisherErrorKeepsBatch: a failed publish leaves the batch
// unpublished; the next claim publishes it.
func TestPublisherErrorKeepsBatch(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		produce(t, e, "o", 5)
		s := e.store(t, nil)
		boom := errors.New("broker down")
		failing := newRelay(t, s, outbox.PublisherFunc(func(context.Context, []outbox.Message) error { return boom }), &outbox.RelayConfig{BatchSize: 3})
		if n, err := failing.Once(ctx); n != 0 || !errors.Is(err, boom) {
			t.Fatalf("Once = %d, %v; want 0, boom", n, err)
		}
		if got := e.unpublished(t); got != 5 {
			t.Fatalf("%d unpublished, want 5", got)
		}
		rec := &recorder{}
		relay := newRelay(t, s, rec, &outbox.RelayConfig{BatchSize: 3})
		for _, want := range []int{3, 2, 0} {
			if n, err := relay.Once(ctx); n != want || err != nil {
				t.Fatalf("Once = %d, %v; want %d", n, err, want)
			}
		}
		if c := rec.counts(); len(c) != 5 {
			t.Fatalf("published %v", c)
		}
	})
}

// TestPublishTimeout: a publisher that hangs is cancelled after
// PublishTimeout and its batch is claimable again.
func TestPublishTimeout(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		produce(t, e, "o", 2)
		s := e.store(t, nil)
		hang := outbox.PublisherFunc(func(ctx context.Context, _ []outbox.Message) error { <-ctx.Done(); return ctx.Err() })
		start := time.Now()
		n, err := newRelay(t, s, hang, &outbox.RelayConfig{PublishTimeout: 100 * time.Millisecond}).Once(ctx)
		if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Once = %d, %v; want DeadlineExceeded", n, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Once returned after %v", d)
		}
		if n, err := newRelay(t, s, &recorder{}, nil).Once(ctx); n != 2 || err != nil {
			t.Fatalf("Once after the timeout = %d, %v; want 2", n, err)
		}
	})
}

// TestConcurrentRelays: four relays drain an outbox while producers keep
// writing to it; in the normal case (no failures) every message is
// published exactly once.
func TestConcurrentRelays(t *testing.T) {
	const relays, producers, perProducer = 4, 4, 100
	each(t, func(t *testing.T, e env) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		rec := &recorder{}
		var wg sync.WaitGroup
		runErrs := make(chan error, relays)
		for range relays {
			r := newRelay(t, e.store(t, nil), rec, &outbox.RelayConfig{BatchSize: 10, PollInterval: 5 * time.Millisecond})
			wg.Go(func() { runErrs <- r.Run(ctx) })
		}
		var pwg sync.WaitGroup
		var written sync.Map
		for p := range producers {
			pwg.Go(func() {
				for i := range perProducer {
					order := fmt.Sprintf("p%d-%03d", p, i)
					id, err := e.order(ctx, nil, order, outbox.Message{Topic: "orders", Payload: []byte(order)}, true)
					if err != nil {
						t.Error(err)
						return
					}
					written.Store(id, true)
				}
			})
		}
		pwg.Wait()
		total := producers * perProducer
		waitFor(t, 60*time.Second, "all messages published", func() bool { return len(rec.counts()) == total && e.unpublished(t) == 0 })
		cancel()
		wg.Wait()
		close(runErrs)
		for err := range runErrs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		}
		for id, n := range rec.counts() {
			if n != 1 {
				t.Errorf("message %s published %d times", id, n)
			}
			if _, ok := written.Load(id); !ok {
				t.Errorf("published %s, which no producer wrote", id)
			}
		}
		t.Logf("%d messages, %d batches, by %d relays", total, len(rec.batches), relays)
	})
}

// TestRelayKilledMidBatch is the crash test: a relay is stopped while it
// holds a claimed batch that it has already delivered — its connection
// killed on the server (pg_terminate_backend, KILL) or its context
// cancelled — and restarted, while a second relay keeps running. The
// consumer handles every delivery with the inbox. Nothing is lost (every
// order's effect is applied), the held batch is delivered again, and the
// inbox absorbs the duplicates: exactly one effect per order.
func TestRelayKilledMidBatch(t *testing.T) {
	const orders, batch = 300, 10
	for _, mode := range []string{"kill connection", "cancel context"} {
		t.Run(mode, func(t *testing.T) {
			each(t, func(t *testing.T, e env) {
				ctx := t.Context()
				produce(t, e, "o", orders)

				var deliveries atomic.Int64
				var mu sync.Mutex
				delivered := map[string]int{}
				deliver := func(ctx context.Context, msgs []outbox.Message) error {
					for _, m := range msgs {
						if _, err := e.consume(ctx, m); err != nil {
							return err
						}
						deliveries.Add(1)
						mu.Lock()
						delivered[m.ID]++
						mu.Unlock()
					}
					return nil
				}

				// Relay A holds its third batch, after delivering it,
				// until the test has stopped it.
				srcA, kill := e.killable(t)
				holding := make(chan []outbox.Message)
				release := make(chan struct{})
				var batches atomic.Int64
				pubA := outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) error {
					if err := deliver(ctx, msgs); err != nil {
						return err
					}
					if batches.Add(1) != 3 {
						return nil
					}
					holding <- msgs
					select {
					case <-release: // killed: the mark will fail
						return nil
					case <-ctx.Done(): // cancelled
						return ctx.Err()
					}
				})
				cfg := &outbox.RelayConfig{BatchSize: batch, PollInterval: 5 * time.Millisecond, RetryDelay: time.Millisecond, MaxRetryDelay: 20 * time.Millisecond}
				relayA := newRelay(t, srcA, pubA, cfg)
				ctxA, cancelA := context.WithCancel(ctx)
				doneA := make(chan error, 1)
				go func() { doneA <- relayA.Run(ctxA) }()

				held := <-holding
				// The held rows are claimed, not published, and no other
				// relay can take them while A's transaction lives.
				if got := e.unpublished(t); got != orders-2*batch {
					t.Fatalf("%d unpublished while A holds a batch, want %d", got, orders-2*batch)
				}
				var offered []outbox.Message
				errProbe := errors.New("probe only")
				probe := outbox.PublisherFunc(func(_ context.Context, msgs []outbox.Message) error {
					offered = msgs
					return errProbe // roll the probe's claim back
				})
				if _, err := newRelay(t, e.store(t, nil), probe, &outbox.RelayConfig{BatchSize: orders}).Once(ctx); !errors.Is(err, errProbe) || len(offered) != orders-3*batch {
					t.Fatalf("a relay beside A was offered %d rows (%v); want the %d rows A does not hold", len(offered), err, orders-3*batch)
				}
				for _, m := range offered {
					for _, h := range held {
						if m.ID == h.ID {
							t.Fatalf("row %s held by A was claimed by another relay", m.ID)
						}
					}
				}

				// B runs from now on.
				ctxB, cancelB := context.WithCancel(ctx)
				defer cancelB()
				var batchesB atomic.Int64
				relayB := newRelay(t, e.store(t, nil), outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) error {
					batchesB.Add(1)
					return deliver(ctx, msgs)
				}), cfg)
				doneB := make(chan error, 1)
				go func() { doneB <- relayB.Run(ctxB) }()

				if mode == "kill connection" {
					kill(t)
					// The server rolled A's claim back: B publishes the
					// held batch again while A is still inside Publish.
					waitFor(t, 30*time.Second, "B republishes the held batch", func() bool { return e.unpublished(t) == 0 })
					close(release) // A's mark now fails; A's Run goes on
				} else {
					cancelA()
					if err := <-doneA; !errors.Is(err, context.Canceled) {
						t.Fatalf("A's Run = %v, want context.Canceled", err)
					}
					// Restart A.
					ctxA, cancelA = context.WithCancel(ctx)
					go func() { doneA <- relayA.Run(ctxA) }()
				}
				waitFor(t, 30*time.Second, "every order applied", func() bool { return len(e.effects(t)) == orders && e.unpublished(t) == 0 })
				cancelA()
				cancelB()
				for _, done := range []chan error{doneA, doneB} {
					if err := <-done; !errors.Is(err, context.Canceled) {
						t.Errorf("Run = %v", err)
					}
				}

				for order, n := range e.effects(t) {
					if n != 1 {
						t.Errorf("order %s applied %d times", order, n)
					}
				}
				for _, m := range held {
					if delivered[m.ID] < 2 {
						t.Errorf("held message %s delivered %d times, want a redelivery", m.ID, delivered[m.ID])
					}
				}
				if got := len(e.query(t, "SELECT consumer, 0 FROM concurkit_inbox")); got != orders {
					t.Errorf("%d inbox entries, want %d", got, orders)
				}
				t.Logf("%d orders, %d deliveries (%d duplicates absorbed by the inbox); batches: relay A %d, relay B %d",
					orders, deliveries.Load(), deliveries.Load()-orders, batches.Load(), batchesB.Load())
			})
		})
	}
}

// TestProducersNotBlockedByRelay: while a relay holds a claimed batch
// (its publisher is slow), producers keep committing new events; on
// MariaDB this needs the claim's READ COMMITTED (no gap locks).
func TestProducersNotBlockedByRelay(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		produce(t, e, "before", 3)
		holding := make(chan struct{})
		release := make(chan struct{})
		slow := outbox.PublisherFunc(func(context.Context, []outbox.Message) error {
			close(holding)
			<-release
			return nil
		})
		done := make(chan error, 1)
		go func() {
			_, err := newRelay(t, e.store(t, nil), slow, nil).Once(ctx)
			done <- err
		}()
		<-holding
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for i := range 3 {
			if _, err := e.order(wctx, nil, fmt.Sprint("during-", i), outbox.Message{Topic: "orders"}, true); err != nil {
				t.Fatalf("producer blocked by the relay's claim: %v", err)
			}
		}
		t.Logf("3 producer transactions committed in %v while a relay held a batch", time.Since(start).Round(time.Millisecond))
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := e.unpublished(t); got != 3 {
			t.Fatalf("%d unpublished, want the 3 written during the claim", got)
		}
	})
}

// TestReap: published rows older than Retention are deleted, in batches;
// unpublished rows never are.
func TestReap(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := t.Context()
		clock := newClock()
		t0 := clock.Now()
		cfg := &outbox.Config{Now: clock.Now, Retention: time.Hour, ReapBatch: 2}
		for i := range 5 {
			if _, err := e.order(ctx, cfg, fmt.Sprint("a", i), outbox.Message{Topic: "orders"}, true); err != nil {
				t.Fatal(err)
			}
		}
		s := e.store(t, cfg)
		if n, err := newRelay(t, s, &recorder{}, nil).Once(ctx); n != 5 || err != nil { // published at t0
			t.Fatalf("Once = %d, %v", n, err)
		}
		clock.set(t0.Add(30 * time.Minute))
		for i := range 3 {
			if _, err := e.order(ctx, cfg, fmt.Sprint("b", i), outbox.Message{Topic: "orders"}, true); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := newRelay(t, s, &recorder{}, &outbox.RelayConfig{BatchSize: 2}).Once(ctx); n != 2 || err != nil { // 2 of 3 at t0+30m
			t.Fatalf("Once = %d, %v", n, err)
		}
		reap := func(want int64) {
			t.Helper()
			if n, err := s.Reap(ctx); n != want || err != nil {
				t.Fatalf("at +%v: Reap = %d, %v; want %d", clock.Now().Sub(t0), n, err, want)
			}
		}
		clock.set(t0.Add(time.Hour - time.Microsecond))
		reap(0)
		clock.set(t0.Add(time.Hour))
		reap(5) // batches of 2, 2, 1
		clock.set(t0.Add(100 * time.Hour))
		reap(2) // the unpublished one stays
		if got := len(e.query(t, "SELECT message_id, id FROM concurkit_outbox")); got != 1 || e.unpublished(t) != 1 {
			t.Fatalf("%d rows left (%d unpublished), want the 1 unpublished", got, e.unpublished(t))
		}
	})
}

// TestRunReportsRetries: Run backs off after a failed batch, reports it
// to the observe hooks, and publishes once the publisher recovers.
func TestRunReportsRetries(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		produce(t, e, "o", 3)
		var mu sync.Mutex
		var events []observe.RetryEvent
		ctx, cancel := context.WithCancel(observe.WithHooks(t.Context(), &observe.Hooks{Retry: func(_ context.Context, ev observe.RetryEvent) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
		}}))
		defer cancel()
		boom := errors.New("broker down")
		var calls atomic.Int64
		published := make(chan struct{})
		pub := outbox.PublisherFunc(func(context.Context, []outbox.Message) error {
			if calls.Add(1) <= 3 {
				return boom
			}
			close(published)
			return nil
		})
		done := make(chan error, 1)
		r := newRelay(t, e.store(t, nil), pub, &outbox.RelayConfig{RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond, PollInterval: time.Hour})
		go func() { done <- r.Run(ctx) }()
		select {
		case <-published:
		case <-time.After(30 * time.Second):
			t.Fatal("never published")
		}
		waitFor(t, 30*time.Second, "batch marked published", func() bool { return e.unpublished(t) == 0 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(events) != 3 {
			t.Fatalf("%d retry events, want 3", len(events))
		}
		for i, ev := range events {
			if ev.Package != "outbox" || ev.Attempt != i+1 || !errors.Is(ev.Err, boom) || ev.GaveUp || ev.Delay > 5*time.Millisecond {
				t.Errorf("event %d: %+v", i, ev)
			}
		}
	})
}
