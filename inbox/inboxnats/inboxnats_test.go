package inboxnats_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxnats"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// setup returns a JetStream handle, a stream on prefix+".>" and a durable
// pull consumer on it with a short AckWait.
func setup(t *testing.T) (jetstream.JetStream, string, jetstream.Consumer) {
	t.Helper()
	js, prefix := testkit.NATS(t)
	s, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: prefix + "_s", Subjects: []string{prefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateOrUpdateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return js, prefix, c
}

func publish(t *testing.T, js jetstream.JetStream, subject, id string) {
	t.Helper()
	m := nats.NewMsg(subject)
	if id != "" {
		m.Header.Set(jetstream.MsgIDHeader, id)
	}
	if _, err := js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeInvalid(t *testing.T) {
	_, _, c := setup(t)
	h := func(context.Context, string, jetstream.Msg) error { return nil }
	var typedNil jetstream.Consumer
	for name, err := range map[string]error{
		"nil consumer":   inboxnats.Consume(t.Context(), nil, h, nil),
		"typed nil":      inboxnats.Consume(t.Context(), typedNil, h, nil),
		"nil handler":    inboxnats.Consume(t.Context(), c, nil, nil),
		"negative delay": inboxnats.Consume(t.Context(), c, h, &inboxnats.Config{NakDelay: -1}),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestAckOnlyAfterHandler: a handler that fails is not acked (the message
// comes back); one that succeeds is acked (it does not).
func TestAckOnlyAfterHandler(t *testing.T) {
	js, prefix, c := setup(t)
	publish(t, js, prefix+".a", "m-1")
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	var ids []string
	var mu sync.Mutex
	done := make(chan struct{})
	stats := new(inboxnats.Stats)
	errc := make(chan error, 1)
	go func() {
		errc <- inboxnats.Consume(ctx, c, func(ctx context.Context, id string, msg jetstream.Msg) error {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			switch calls.Add(1) {
			case 1:
				return errors.New("transaction failed")
			case 2:
				close(done)
			}
			return nil
		}, &inboxnats.Config{NakDelay: 10 * time.Millisecond, Stats: stats})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the failed message was not redelivered")
	}
	// Longer than AckWait: an unacked message would be redelivered.
	time.Sleep(2 * time.Second)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume = %v", err)
	}
	if n := calls.Load(); n != 2 || ids[0] != "m-1" || ids[1] != "m-1" {
		t.Fatalf("handler calls %d with %v, want 2 with m-1", n, ids)
	}
	if stats.Acked.Load() != 1 || stats.Failed.Load() != 1 || stats.Redelivered.Load() != 1 {
		t.Fatalf("stats acked %d failed %d redelivered %d", stats.Acked.Load(), stats.Failed.Load(), stats.Redelivered.Load())
	}
}

// TestMissingID: a message without Nats-Msg-Id never reaches the
// handler; DeadLetter gets it (reason ErrInvalidID) and it is terminated.
func TestMissingID(t *testing.T) {
	js, prefix, c := setup(t)
	publish(t, js, prefix+".a", "")
	publish(t, js, prefix+".a", "m-2")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dead := make(chan error, 10)
	got := make(chan string, 10)
	errc := make(chan error, 1)
	go func() {
		errc <- inboxnats.Consume(ctx, c, func(ctx context.Context, id string, msg jetstream.Msg) error {
			got <- id
			return nil
		}, &inboxnats.Config{DeadLetter: func(ctx context.Context, msg jetstream.Msg, reason error) error {
			dead <- reason
			return nil
		}})
	}()
	if id := <-got; id != "m-2" {
		t.Fatalf("handler got %q", id)
	}
	if reason := <-dead; !errors.Is(reason, inbox.ErrInvalidID) {
		t.Fatalf("DeadLetter reason %v", reason)
	}
	time.Sleep(2 * time.Second) // past AckWait: a terminated message is not redelivered
	cancel()
	<-errc
	if len(dead) != 0 || len(got) != 0 {
		t.Fatalf("redelivered: %d dead-lettered, %d handled again", len(dead), len(got))
	}
}
