package inboxnats_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit/inbox/inboxnats"
)

// A message published twice with one Nats-Msg-Id beyond JetStream's
// duplicate window reaches the consumer twice, with the same id: the
// handler gives it to the inbox (inboxpg.Handle), which applies it once.
// Here a map stands in for the inbox. The ack is sent only after the
// handler returned nil.
func ExampleConsume() {
	url := os.Getenv("CONCURKIT_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:14222"
	}
	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("INBOX_EXAMPLE_%d", rand.Uint32())
	// A 100 ms duplicate window (the minimum): both copies are stored.
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Duplicates: 100 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	for range 2 {
		m := nats.NewMsg(name + ".orders")
		m.Header.Set(jetstream.MsgIDHeader, "order-42")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			fmt.Println(err)
			return
		}
		time.Sleep(150 * time.Millisecond) // past the window
	}
	consumer, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		fmt.Println(err)
		return
	}
	applied := map[string]bool{} // the inbox, in a real consumer
	deliveries := 0
	ctx, stop := context.WithCancel(ctx)
	err = inboxnats.Consume(ctx, consumer, func(ctx context.Context, id string, msg jetstream.Msg) error {
		deliveries++
		if !applied[id] {
			applied[id] = true // inboxpg.Handle(ctx, pool, "billing", id, fn) in a real consumer
		}
		if deliveries == 2 {
			stop()
		}
		return nil
	}, nil)
	fmt.Println(err, "deliveries:", deliveries, "applied:", len(applied))
	// Output: context canceled deliveries: 2 applied: 1
}
