package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/concurkit/concurkit/outbox"
)

// memory is a toy Source over a slice; the real ones are outboxpg.Store
// and outboxmysql.Store.
type memory struct {
	mu   sync.Mutex
	msgs []outbox.Message
}

func (m *memory) Claim(ctx context.Context, n int, publish func(context.Context, []outbox.Message) error) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	batch := m.msgs[:min(n, len(m.msgs))]
	if len(batch) == 0 {
		return 0, nil
	}
	if err := publish(ctx, batch); err != nil {
		return 0, err // the batch stays
	}
	m.msgs = m.msgs[len(batch):]
	return len(batch), nil
}

// Once relays one batch; here the outbox is drained batch by batch.
func ExampleRelay_Once() {
	ctx := context.Background()
	src := &memory{msgs: []outbox.Message{{ID: "m1", Topic: "orders"}, {ID: "m2", Topic: "orders"}, {ID: "m3", Topic: "audit"}}}
	publish := outbox.Each(func(_ context.Context, m outbox.Message) error {
		fmt.Println("publish", m.ID, "to", m.Topic)
		return nil
	})
	relay, err := outbox.NewRelay(src, publish, &outbox.RelayConfig{BatchSize: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for {
		n, err := relay.Once(ctx)
		fmt.Println("batch of", n, err)
		if n == 0 || err != nil {
			break
		}
	}
	// Output:
	// publish m1 to orders
	// publish m2 to orders
	// batch of 2 <nil>
	// publish m3 to audit
	// batch of 1 <nil>
	// batch of 0 <nil>
}

// Run relays until its context ends; a service runs it in a goroutine for
// its lifetime. Here the publisher stops it once it has seen m2.
func ExampleRelay_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &memory{msgs: []outbox.Message{{ID: "m1", Topic: "orders"}, {ID: "m2", Topic: "orders"}}}
	publish := outbox.PublisherFunc(func(_ context.Context, msgs []outbox.Message) error {
		for _, m := range msgs {
			fmt.Println("publish", m.ID)
			if m.ID == "m2" {
				cancel()
			}
		}
		return nil
	})
	relay, err := outbox.NewRelay(src, publish, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(relay.Run(ctx))
	// Output:
	// publish m1
	// publish m2
	// context canceled
}

// A publisher that dead-letters the rows a relay could not read (here the
// toy source hands over one as the adapters do: headers written by other
// code that are not a JSON object of strings) and publishes the rest; the
// batch succeeds, so no row stops the relay.
func ExampleMalformedError() {
	ctx := context.Background()
	src := &memory{msgs: []outbox.Message{
		{ID: "m1", Topic: "orders"},
		{ID: "m2", Topic: "orders", Malformed: &outbox.MalformedError{
			Column: "headers", Stored: []byte(`{"retries": 3}`), Err: errors.New("json: cannot unmarshal number into Go value of type string")}},
		{ID: "m3", Topic: "orders"},
	}}
	publish := outbox.Each(func(_ context.Context, m outbox.Message) error {
		var bad *outbox.MalformedError
		if errors.As(m.Malformed, &bad) {
			fmt.Printf("dead-letter %s: %s %s\n", m.ID, bad.Column, bad.Stored)
			return nil
		}
		fmt.Println("publish", m.ID)
		return nil
	})
	relay, err := outbox.NewRelay(src, publish, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(relay.Once(ctx))
	// Output:
	// publish m1
	// dead-letter m2: headers {"retries": 3}
	// publish m3
	// 3 <nil>
}
