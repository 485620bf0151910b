package inboxamqp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit/inbox/inboxamqp"
)

// A relay that published an event again after a crash puts a second
// message with the same message_id on the queue (RabbitMQ does not
// deduplicate): the handler gives both to the inbox (inboxpg.Handle),
// which applies the event once. Here a map stands in for the inbox. Each
// delivery is acknowledged only after the handler returned nil.
func ExampleConsume() {
	url := os.Getenv("CONCURKIT_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:15680/"
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		fmt.Println(err)
		return
	}
	q := fmt.Sprintf("inbox_example_%d", rand.Uint32())
	if _, err := ch.QueueDeclare(q, false, true, false, false, nil); err != nil { // auto-delete
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		_ = ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{MessageId: "order-42", Body: []byte("charge 10")})
	}
	_ = ch.Qos(10, 0, false)
	applied := map[string]bool{} // the inbox, in a real consumer
	deliveries := 0
	ctx, stop := context.WithCancel(ctx)
	err = inboxamqp.Consume(ctx, ch, q, func(ctx context.Context, id string, d amqp.Delivery) error {
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
