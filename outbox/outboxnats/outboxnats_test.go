package outboxnats_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxnats"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/testkit"
)

// stream creates a stream capturing prefix+".>" (MaxMsgSize 4 KiB) and
// returns it.
func stream(t *testing.T, js jetstream.JetStream, prefix string) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: prefix + "_s", Subjects: []string{prefix + ".>"}, Storage: jetstream.FileStorage, MaxMsgSize: 4 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewInvalid(t *testing.T) {
	var typedNil jetstream.JetStream
	for _, js := range []outboxnats.JetStream{nil, typedNil} {
		if _, err := outboxnats.New(js, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Fatalf("New(%#v) = %v, want ErrInvalidArgument", js, err)
		}
	}
}

// TestPublishMapping: subject, payload, Nats-Msg-Id, key and headers
// arrive as mapped; a second publish of the batch (a relay that died
// before its mark) is dropped by JetStream as a duplicate.
func TestPublishMapping(t *testing.T) {
	js, prefix := testkit.NATS(t)
	s := stream(t, js, prefix)
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: prefix + ".orders", Key: "o-1", Payload: []byte("one"), Headers: map[string]string{"Content-Type": "text/plain"}},
		{ID: outbox.NewID(), Topic: prefix + ".orders", Payload: []byte("two")},
	}
	ctx := t.Context()
	if err := pub.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if got := pub.Stats(); got != (outboxnats.Stats{Stored: 2, Duplicates: 2}) {
		t.Fatalf("Stats = %+v, want 2 stored, 2 duplicates", got)
	}
	for i, m := range msgs {
		raw, err := s.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if raw.Subject != m.Topic || string(raw.Data) != string(m.Payload) || raw.Header.Get(jetstream.MsgIDHeader) != m.ID ||
			raw.Header.Get(outboxnats.KeyHeader) != m.Key || raw.Header.Get("Content-Type") != m.Headers["Content-Type"] {
			t.Errorf("message %d stored as %s %q %v", i, raw.Subject, raw.Data, raw.Header)
		}
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages (%v), want 2", info.State.Msgs, err)
	}
}

// badMessages are refused for good: by the adapter's checks, the client
// or the stream.
func badMessages(prefix string) map[string]outbox.Message {
	m := func(topic string, payload []byte, h map[string]string) outbox.Message {
		return outbox.Message{ID: outbox.NewID(), Topic: topic, Payload: payload, Headers: h}
	}
	return map[string]outbox.Message{
		"stream MaxMsgSize":       m(prefix+".big", make([]byte, 8<<10), nil),
		"server max_payload":      m(prefix+".huge", make([]byte, 2<<20), nil),
		"empty token":             m(prefix+"..x", nil, nil),
		"space in subject":        m(prefix+".a b", nil, nil),
		"wildcard subject":        m(prefix+".*", nil, nil),
		"API subject":             m("$JS.API.STREAM.DELETE."+prefix+"_s", nil, nil),
		"Nats- header":            m(prefix+".x", nil, map[string]string{"Nats-Rollup": "sub"}),
		"header value CRLF":       m(prefix+".x", nil, map[string]string{"X-A": "a\r\nNats-Rollup: all"}),
		"header value spaces":     m(prefix+".x", nil, map[string]string{"X-A": " a"}),
		"header name colon":       m(prefix+".x", nil, map[string]string{"X:A": "a"}),
		"header named KeyHeader":  m(prefix+".x", nil, map[string]string{"outbox-key": "a"}),
		"key with LF":             {ID: outbox.NewID(), Topic: prefix + ".x", Key: "a\nb"},
		"malformed row (headers)": {ID: outbox.NewID(), Topic: prefix + ".x", Malformed: &outbox.MalformedError{Column: "headers", Stored: []byte(`"x"`), Err: errors.New("not an object")}},
	}
}

// TestRejectedWithoutDeadLetter: each undeliverable message fails its
// batch with an error matching outbox.ErrRejected (or ErrMalformedRow),
// and the stream is intact (a rollup or API call never went out).
func TestRejectedWithoutDeadLetter(t *testing.T) {
	js, prefix := testkit.NATS(t)
	s := stream(t, js, prefix)
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range badMessages(prefix) {
		t.Run(name, func(t *testing.T) {
			err := pub.Publish(t.Context(), []outbox.Message{m})
			if !errors.Is(err, outbox.ErrRejected) && !errors.Is(err, outbox.ErrMalformedRow) {
				t.Fatalf("Publish = %v, want ErrRejected or ErrMalformedRow", err)
			}
			t.Log(err)
		})
	}
	if _, err := s.Info(t.Context()); err != nil {
		t.Fatalf("stream after the bad messages: %v", err)
	}
}

// TestRelayDeadLetters: a relay on PostgreSQL whose outbox holds good
// messages and one of each undeliverable kind publishes the good ones,
// hands each bad one to DeadLetter once, marks everything published, and
// never fails a batch.
func TestRelayDeadLetters(t *testing.T) {
	js, prefix := testkit.NATS(t)
	s := stream(t, js, prefix)
	url := testkit.PostgresURL(t)
	ctx := t.Context()
	if err := migrations.Up(ctx, migrations.Postgres, url); err != nil {
		t.Fatal(err)
	}
	pool := testkit.PostgresPoolFor(t, url)
	var mu sync.Mutex
	dead := map[string]error{}
	pub, err := outboxnats.New(js, &outboxnats.Config{DeadLetter: func(ctx context.Context, m outbox.Message, reason error) error {
		mu.Lock()
		defer mu.Unlock()
		dead[m.ID] = reason
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	bad := badMessages(prefix)
	want := 0
	for name, m := range bad {
		if m.Malformed != nil {
			// Written by other code: headers that are not an object.
			if _, err := pool.Exec(ctx, `INSERT INTO concurkit_outbox (message_id, topic, payload, headers, created_at) VALUES ($1, $2, '', '"x"', now())`, m.ID, m.Topic); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := outboxpg.Add(ctx, pool, m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for range 3 {
			if _, err := outboxpg.Add(ctx, pool, outbox.Message{Topic: prefix + ".good", Payload: []byte("ok")}); err != nil {
				t.Fatal(err)
			}
			want++
		}
	}
	store, err := outboxpg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(store, pub, &outbox.RelayConfig{BatchSize: 7})
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
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != uint64(want) {
		t.Fatalf("stream holds %d messages (%v), want the %d good ones", info.State.Msgs, err, want)
	}
	if st := pub.Stats(); st.DeadLettered != int64(len(bad)) || st.Stored != int64(want) {
		t.Fatalf("Stats = %+v", st)
	}
}

// TestDeadLetterError: a DeadLetter error fails the batch; nothing is
// marked published.
func TestDeadLetterError(t *testing.T) {
	js, prefix := testkit.NATS(t)
	stream(t, js, prefix)
	boom := errors.New("dead-letter store down")
	pub, err := outboxnats.New(js, &outboxnats.Config{DeadLetter: func(context.Context, outbox.Message, error) error { return boom }})
	if err != nil {
		t.Fatal(err)
	}
	err = pub.Publish(t.Context(), []outbox.Message{{ID: outbox.NewID(), Topic: prefix + "..bad"}})
	if !errors.Is(err, boom) {
		t.Fatalf("Publish = %v, want the DeadLetter error", err)
	}
}

// TestNoStreamIsRetried: a subject no stream captures fails the batch
// (no responders), and is not a rejection: the stream may be created.
func TestNoStreamIsRetried(t *testing.T) {
	js, prefix := testkit.NATS(t)
	called := false
	pub, err := outboxnats.New(js, &outboxnats.Config{DeadLetter: func(context.Context, outbox.Message, error) error { called = true; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = pub.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: prefix + ".nostream"}})
	if err == nil || errors.Is(err, outbox.ErrRejected) || called {
		t.Fatalf("Publish = %v (dead-lettered %v), want a retryable failure", err, called)
	}
}

// TestPublishContextEnds: a publish whose acks do not come before the
// context ends (server frozen) fails with the context's error.
func TestPublishContextEnds(t *testing.T) {
	p := testkit.StartNATS(t)
	nc := testkit.NATSConn(t, "nats://"+p.Addr)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	stream(t, js, "ck")
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Freeze(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = pub.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: "ck.x"}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not acknowledged") {
		t.Fatalf("Publish = %v, want DeadlineExceeded", err)
	}
	p.Thaw(t)
}

func TestValidateSubject(t *testing.T) {
	for s, ok := range map[string]bool{
		"orders": true, "orders.eu.1": true, "a-b_c": true, "ordér": true,
		"": false, ".a": false, "a.": false, "a..b": false, "a b": false, "a\tb": false, "a.*": false, "a.>": false,
		"$JS.API.INFO": false, "$SYS.x": false, "a\x7f": false,
	} {
		err := outboxnats.ValidateSubject(s)
		if (err == nil) != ok || (err != nil && !errors.Is(err, outbox.ErrRejected)) {
			t.Errorf("ValidateSubject(%q) = %v", s, err)
		}
	}
}

// TestPublishContextEndedBefore: a context that ended before Publish
// sends nothing (a batch sent anyway would be published twice, the copy
// left to JetStream's window or the inbox).
func TestPublishContextEndedBefore(t *testing.T) {
	js, prefix := testkit.NATS(t)
	s := stream(t, js, prefix)
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = pub.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: prefix + ".x"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish = %v, want Canceled", err)
	}
	info, err := s.Info(t.Context())
	if err != nil || info.State.Msgs != 0 {
		t.Fatalf("stream holds %d messages (%v), want 0", info.State.Msgs, err)
	}
}
