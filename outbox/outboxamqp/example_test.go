package outboxamqp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxamqp"
)

// A Publisher sends a batch to the queue named like each message's topic
// (the default exchange) and returns once RabbitMQ confirmed every
// message; give it to outbox.NewRelay with an outboxpg or outboxmysql
// store. A message too large for the broker goes to DeadLetter and the
// rest of the batch goes through.
func ExampleNew() {
	url := os.Getenv("CONCURKIT_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:15680/"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(ctx context.Context) (*amqp.Connection, error) { return amqp.Dial(url) }
	keepForLater := func(ctx context.Context, msg outbox.Message, reason error) error {
		fmt.Println("dead letter:", msg.ID, len(msg.Payload), "bytes")
		return nil // store it for a person to look at
	}
	pub, err := outboxamqp.New(dial, &outboxamqp.Config{DeadLetter: keepForLater})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = pub.Close() }()

	conn, err := dial(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = conn.Close() }()
	ch, _ := conn.Channel()
	q := fmt.Sprintf("orders_example_%d", rand.Uint32())
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _, _ = ch.QueueDelete(q, false, false, false) }()

	err = pub.Publish(ctx, []outbox.Message{
		{ID: "order-1", Topic: q, Payload: []byte("created")},
		{ID: "order-2", Topic: q, Payload: make([]byte, 17<<20)}, // above max_message_size (16 MiB on the project's server)
		{ID: "order-3", Topic: q, Payload: []byte("created")},
	})
	fmt.Println("published:", err, pub.Stats().Confirmed, "confirmed")
	// Output:
	// dead letter: order-2 17825792 bytes
	// published: <nil> 2 confirmed
}
