package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestNATS: the shared server has JetStream; a test's streams are named
// by its prefix.
func TestNATS(t *testing.T) {
	js, prefix := NATS(t)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: prefix + "_s", Subjects: []string{prefix + ".>"}}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, prefix+".x", []byte("hi"))
	if err != nil || ack.Stream != prefix+"_s" {
		t.Fatalf("publish: %+v, %v", ack, err)
	}
	if !strings.HasPrefix(prefix, "ck_") || strings.ContainsAny(prefix, ".*> ") {
		t.Fatalf("prefix %q is not a stream name and subject token", prefix)
	}
}

// TestStartNATS: a throwaway server keeps its streams across a SIGKILL and
// restart (file storage), and answers nothing while frozen.
func TestStartNATS(t *testing.T) {
	p := StartNATS(t)
	checkLoopbackOnly(t, p.Addr)
	nc := NATSConn(t, "nats://"+p.Addr)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "s", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	p.Kill(t)
	p.Start(t)
	if err := waitFor(ctx, func(ctx context.Context) error {
		s, err := js.Stream(ctx, "s")
		if err != nil {
			return err
		}
		if n := s.CachedInfo().State.Msgs; n != 1 {
			return errors.New("not recovered")
		}
		return nil
	}); err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	p.Freeze(t)
	fctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := js.Publish(fctx, "s.2", []byte("two")); err == nil {
		t.Fatal("a frozen server acknowledged a publish")
	}
	p.Thaw(t)
	if err := waitFor(ctx, func(ctx context.Context) error { _, err := js.Publish(ctx, "s.3", nil); return err }); err != nil {
		t.Fatal(err)
	}
}

// TestStartRabbitMQ: a throwaway broker listens on loopback only (AMQP and
// distribution), serves AMQP, keeps a durable queue and its persistent
// messages across a clean restart (Stop, Start), and keeps a confirmed
// persistent message across a SIGKILL and restart. The queue is declared
// before the clean restart: RabbitMQ 3.10 killed moments after declaring a
// queue can come back without it (3 of 11 kills on a loaded machine), which
// is the broker's behaviour, not testkit's.
func TestStartRabbitMQ(t *testing.T) {
	p := StartRabbitMQ(t)
	checkLoopbackOnly(t, p.Addr)
	url := "amqp://guest:guest@" + p.Addr + "/"
	publish := func(conn *amqp.Connection, body string) {
		t.Helper()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), "", "q", true, false, amqpPersistent(body))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(t.Context()); !ok || err != nil {
			t.Fatalf("confirm: %v %v", ok, err)
		}
	}
	messages := func(conn *amqp.Connection, want int) error {
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
		if err != nil {
			return err
		}
		if q.Messages != want {
			return fmt.Errorf("%d messages, want %d", q.Messages, want)
		}
		return nil
	}
	conn := AMQPConn(t, url)
	AMQPQueue(t, conn, url, "q")
	publish(conn, "x")

	p.Stop(t)
	p.Start(t)
	conn = AMQPConn(t, url)
	if err := messages(conn, 1); err != nil {
		t.Fatalf("queue after a clean restart: %v", err)
	}
	publish(conn, "y")

	p.Kill(t)
	p.Start(t)
	conn = AMQPConn(t, url)
	// A queue whose process is still recovering after an unclean shutdown
	// answers 404 "down or inaccessible" (which closes the channel) until it
	// is back; a queue or message that was lost never comes back, and the
	// test fails after waitFor's bound.
	if err := waitFor(t.Context(), func(context.Context) error { return messages(conn, 2) }); err != nil {
		t.Fatalf("queue after SIGKILL and restart: %v", err)
	}
}

// TestAMQP: the shared server serves AMQP with publisher confirms.
func TestAMQP(t *testing.T) {
	conn, prefix := AMQP(t)
	url := AMQPURL(t)
	AMQPQueue(t, conn, url, prefix+"_q")
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), "", prefix+"_q", true, false, amqpPersistent("x"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(t.Context()); !ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}
}

// waitFor retries f until it returns nil or 60 s passed.
func waitFor(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func amqpPersistent(body string) amqp.Publishing {
	return amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)}
}
