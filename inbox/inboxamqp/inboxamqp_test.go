package inboxamqp_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxamqp"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

func setup(t *testing.T) (*amqp.Channel, string) {
	t.Helper()
	conn, prefix := testkit.AMQP(t)
	q := prefix + "_q"
	testkit.AMQPQueue(t, conn, testkit.AMQPURL(t), q)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	return ch, q
}

func publish(t *testing.T, ch *amqp.Channel, q, id string) {
	t.Helper()
	if err := ch.PublishWithContext(t.Context(), "", q, false, false, amqp.Publishing{MessageId: id, Body: []byte(id)}); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeInvalid(t *testing.T) {
	ch, q := setup(t)
	h := func(context.Context, string, amqp.Delivery) error { return nil }
	var typedNil *amqp.Channel
	for name, err := range map[string]error{
		"nil channel":    inboxamqp.Consume(t.Context(), nil, q, h, nil),
		"typed nil":      inboxamqp.Consume(t.Context(), typedNil, q, h, nil),
		"nil handler":    inboxamqp.Consume(t.Context(), ch, q, nil, nil),
		"negative delay": inboxamqp.Consume(t.Context(), ch, q, h, &inboxamqp.Config{RetryDelay: -1}),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestAckOnlyAfterHandler: a failed handler's delivery is requeued and
// comes back; a successful one is acked (the queue ends empty, nothing
// unacked).
func TestAckOnlyAfterHandler(t *testing.T) {
	ch, q := setup(t)
	publish(t, ch, q, "m-1")
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	stats := new(inboxamqp.Stats)
	errc := make(chan error, 1)
	go func() {
		errc <- inboxamqp.Consume(ctx, ch, q, func(ctx context.Context, id string, d amqp.Delivery) error {
			if id != "m-1" {
				t.Errorf("id %q", id)
			}
			if calls.Add(1) == 1 {
				return errors.New("transaction failed")
			}
			cancel()
			return nil
		}, &inboxamqp.Config{RetryDelay: 10 * time.Millisecond, Stats: stats})
	}()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume = %v", err)
	}
	if stats.Acked.Load() != 1 || stats.Failed.Load() != 1 || stats.Redelivered.Load() != 1 {
		t.Fatalf("acked %d failed %d redelivered %d", stats.Acked.Load(), stats.Failed.Load(), stats.Redelivered.Load())
	}
	// Close the channel: an unacked delivery would be requeued.
	closed := make(chan error, 1)
	go func() { closed <- ch.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Channel.Close hangs after Consume returned")
	}
	conn, _ := testkit.AMQP(t)
	ch2, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	st, err := ch2.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil || st.Messages != 0 {
		t.Fatalf("queue holds %d messages (%v), want 0", st.Messages, err)
	}
}

// TestMissingID: a delivery without message_id goes to DeadLetter and is
// rejected without requeue; the next one is handled.
func TestMissingID(t *testing.T) {
	ch, q := setup(t)
	publish(t, ch, q, "")
	publish(t, ch, q, "m-2")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dead := make(chan error, 10)
	errc := make(chan error, 1)
	go func() {
		errc <- inboxamqp.Consume(ctx, ch, q, func(ctx context.Context, id string, d amqp.Delivery) error {
			if id != "m-2" {
				t.Errorf("handler got %q", id)
			}
			cancel()
			return nil
		}, &inboxamqp.Config{DeadLetter: func(ctx context.Context, d amqp.Delivery, reason error) error {
			dead <- reason
			return nil
		}})
	}()
	<-errc
	if len(dead) != 1 {
		t.Fatalf("%d dead-lettered", len(dead))
	}
	if reason := <-dead; !errors.Is(reason, inbox.ErrInvalidID) {
		t.Fatalf("reason %v", reason)
	}
}

// TestChannelClosed: Consume returns ErrChannelClosed when the channel
// closes under it (a broker restart looks the same).
func TestChannelClosed(t *testing.T) {
	ch, q := setup(t)
	errc := make(chan error, 1)
	go func() {
		errc <- inboxamqp.Consume(t.Context(), ch, q, func(context.Context, string, amqp.Delivery) error { return nil }, nil)
	}()
	time.Sleep(100 * time.Millisecond) // let it subscribe; closing first is also a close
	_ = ch.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, inboxamqp.ErrChannelClosed) && !errors.Is(err, amqp.ErrClosed) {
			t.Fatalf("Consume = %v, want ErrChannelClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Consume did not return after the channel closed")
	}
}
