package outboxamqp_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxamqp"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/testkit"
)

// broker returns the shared server's URL, a dialer, a connection for the
// test's own reads, and a queue named prefix+"_q".
func broker(t *testing.T) (string, outboxamqp.Dialer, *amqp.Connection, string) {
	t.Helper()
	conn, prefix := testkit.AMQP(t)
	url := testkit.AMQPURL(t)
	q := prefix + "_q"
	testkit.AMQPQueue(t, conn, url, q)
	return url, func(context.Context) (*amqp.Connection, error) { return amqp.Dial(url) }, conn, q
}

func newPublisher(t *testing.T, dial outboxamqp.Dialer, cfg *outboxamqp.Config) *outboxamqp.Publisher {
	t.Helper()
	p, err := outboxamqp.New(dial, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// get reads n messages of q (auto-ack).
func get(t *testing.T, conn *amqp.Connection, q string, n int) []amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ch.Close() }()
	var out []amqp.Delivery
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		out = append(out, d)
	}
	return out
}

func TestNewInvalid(t *testing.T) {
	if _, err := outboxamqp.New(nil, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("New(nil) = %v", err)
	}
}

// TestPublishMapping: message_id, persistence, timestamp, key and headers.
func TestPublishMapping(t *testing.T) {
	_, dial, conn, q := broker(t)
	p := newPublisher(t, dial, nil)
	created := time.Now().UTC().Truncate(time.Second)
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: q, Key: "o-1", Payload: []byte("one"), Headers: map[string]string{"content-type": "text/plain"}, CreatedAt: created},
		{ID: outbox.NewID(), Topic: q, Payload: []byte("two"), CreatedAt: created},
	}
	if err := p.Publish(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	got := get(t, conn, q, 2)
	if len(got) != 2 {
		t.Fatalf("got %d messages", len(got))
	}
	for i, d := range got {
		m := msgs[i]
		key, _ := d.Headers[outboxamqp.KeyHeader].(string)
		ct, _ := d.Headers["content-type"].(string)
		if d.MessageId != m.ID || string(d.Body) != string(m.Payload) || d.DeliveryMode != amqp.Persistent ||
			!d.Timestamp.Equal(created) || key != m.Key || ct != m.Headers["content-type"] {
			t.Errorf("message %d arrived as %+v", i, d)
		}
	}
	if st := p.Stats(); st.Confirmed != 2 {
		t.Fatalf("Stats = %+v", st)
	}
}

// TestUnroutableFails: mandatory publishing: a message no queue takes is
// returned, and that fails the batch (retried), not dead-lettered.
func TestUnroutableFails(t *testing.T) {
	_, dial, _, q := broker(t)
	called := false
	p := newPublisher(t, dial, &outboxamqp.Config{DeadLetter: func(context.Context, outbox.Message, error) error { called = true; return nil }})
	err := p.Publish(t.Context(), []outbox.Message{{ID: outbox.NewID(), Topic: q}, {ID: outbox.NewID(), Topic: q + "_nowhere"}})
	if err == nil || !strings.Contains(err.Error(), "unroutable") || errors.Is(err, outbox.ErrRejected) || called {
		t.Fatalf("Publish = %v (dead-lettered %v), want an unroutable failure", err, called)
	}
	if st := p.Stats(); st.Returned != 1 {
		t.Fatalf("Stats = %+v", st)
	}
	// The channel is still good for the next batch.
	if err := p.Publish(t.Context(), []outbox.Message{{ID: outbox.NewID(), Topic: q}}); err != nil {
		t.Fatal(err)
	}
}

// TestRelayDeadLetters: on PostgreSQL, an outbox with good messages and a
// too-large one (above the broker's max_message_size, 16 MiB on the
// project's server), a CC header, an over-long header name and a
// malformed row: the relay confirms the good ones, dead-letters each bad
// one, marks everything published and never fails a batch.
func TestRelayDeadLetters(t *testing.T) {
	_, dial, conn, q := broker(t)
	url := testkit.PostgresURL(t)
	ctx := t.Context()
	if err := migrations.Up(ctx, migrations.Postgres, url); err != nil {
		t.Fatal(err)
	}
	pool := testkit.PostgresPoolFor(t, url)
	var mu sync.Mutex
	dead := map[string]error{}
	p := newPublisher(t, dial, &outboxamqp.Config{DeadLetter: func(ctx context.Context, m outbox.Message, reason error) error {
		mu.Lock()
		defer mu.Unlock()
		dead[m.ID] = reason
		return nil
	}})
	bad := map[string]outbox.Message{
		"too large":     {ID: outbox.NewID(), Topic: q, Payload: make([]byte, 17<<20)},
		"CC header":     {ID: outbox.NewID(), Topic: q, Headers: map[string]string{"CC": "other-queue"}},
		"long header":   {ID: outbox.NewID(), Topic: q, Headers: map[string]string{strings.Repeat("h", 256): "v"}},
		"key header":    {ID: outbox.NewID(), Topic: q, Headers: map[string]string{"Outbox-Key": "v"}},
		"malformed row": {ID: outbox.NewID(), Topic: q, Malformed: errors.New("set below")},
	}
	good := 0
	for name, m := range bad {
		for range 2 {
			if _, err := outboxpg.Add(ctx, pool, outbox.Message{Topic: q, Payload: []byte("ok")}); err != nil {
				t.Fatal(err)
			}
			good++
		}
		if m.Malformed != nil {
			if _, err := pool.Exec(ctx, `INSERT INTO concurkit_outbox (message_id, topic, payload, headers, created_at) VALUES ($1, $2, '', '[1]', now())`, m.ID, m.Topic); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := outboxpg.Add(ctx, pool, m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	store, err := outboxpg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(store, p, &outbox.RelayConfig{BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := relay.Once(ctx)
		if err != nil {
			t.Fatalf("a batch failed: %v", err)
		}
		if n == 0 {
			break
		}
	}
	if pending, err := store.Pending(ctx); err != nil || pending != 0 {
		t.Fatalf("pending = %d, %v", pending, err)
	}
	for name, m := range bad {
		reason, ok := dead[m.ID]
		if !ok || !(errors.Is(reason, outbox.ErrRejected) || errors.Is(reason, outbox.ErrMalformedRow)) {
			t.Errorf("%s: dead-lettered = %v, reason %v", name, ok, reason)
		}
		t.Logf("%s: %v", name, reason)
	}
	if got := get(t, conn, q, good); len(got) != good {
		t.Fatalf("queue got %d good messages, want %d", len(got), good)
	}
}

// TestPublishContextEnds: a publish whose confirms do not come before the
// context ends (the broker frozen, as a proxy that stops forwarding shows
// it to the client) fails with the context's error, and the publisher
// works again once the broker is back, and after its connections were cut
// (a broker restart, as the client sees it; the end-to-end test kills and
// restarts a real broker).
func TestPublishContextEnds(t *testing.T) {
	u, err := url.Parse(testkit.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	via := u.String()
	conn := testkit.AMQPConn(t, testkit.AMQPURL(t))
	q := testkit.Name("ck_q_")
	testkit.AMQPQueue(t, conn, testkit.AMQPURL(t), q)
	p := newPublisher(t, func(context.Context) (*amqp.Connection, error) { return amqp.Dial(via) }, nil)
	if err := p.Publish(t.Context(), []outbox.Message{{ID: outbox.NewID(), Topic: q}}); err != nil {
		t.Fatal(err)
	}
	proxy.Freeze()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: q}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish = %v, want DeadlineExceeded", err)
	}
	// A guard, not a speed check: the relay holds its claim while Publish
	// runs, so a frozen broker must not keep it past the context.
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Publish returned %v after a 300 ms deadline", took.Round(time.Millisecond))
	}
	// Again, still frozen: the publisher opens a new channel, which the
	// broker does not answer either.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel2()
	start = time.Now()
	if err := p.Publish(ctx2, []outbox.Message{{ID: outbox.NewID(), Topic: q}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Publish = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("second Publish returned %v after a 300 ms deadline", took.Round(time.Millisecond))
	}
	proxy.Thaw()
	if err := p.Publish(t.Context(), []outbox.Message{{ID: outbox.NewID(), Topic: q}}); err != nil {
		t.Fatal(err)
	}
	// Connections cut: the publisher dials again.
	proxy.Cut()
	var last error
	for range 50 {
		if last = p.Publish(t.Context(), []outbox.Message{{ID: outbox.NewID(), Topic: q}}); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("publish after the connections were cut: %v", last)
}

// TestPublishContextEndedBefore: a context that ended before Publish
// sends nothing.
func TestPublishContextEndedBefore(t *testing.T) {
	_, dial, conn, q := broker(t)
	p := newPublisher(t, dial, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: q}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish = %v, want Canceled", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil || st.Messages != 0 {
		t.Fatalf("queue holds %d messages (%v), want 0", st.Messages, err)
	}
}
