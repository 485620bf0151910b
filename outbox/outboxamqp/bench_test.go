package outboxamqp_test

import (
	"context"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxamqp"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/testkit"
)

// fill inserts n unpublished 100-byte events in one statement.
const fill = `INSERT INTO concurkit_outbox (message_id, topic, message_key, payload, created_at)
SELECT gen_random_uuid()::text, $2, i::text, convert_to(repeat('x', 100), 'UTF8'), now()
FROM generate_series(1, $1) AS i`

// BenchmarkRelay: one relay moving events from a PostgreSQL outbox to a
// durable RabbitMQ queue (the project's RabbitMQ), at batch sizes 1, 10
// and 100: each batch is one claim transaction and one confirmed,
// persistent, mandatory publish per event, waiting for every confirm
// before the mark. Compare with BenchmarkPublishLoop: the ceiling.
func BenchmarkRelay(b *testing.B) {
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			conn, prefix := testkit.AMQP(b)
			url := testkit.AMQPURL(b)
			q := prefix + "_bench"
			testkit.AMQPQueue(b, conn, url, q)
			u := testkit.PostgresURL(b)
			if err := migrations.Up(ctx, migrations.Postgres, u); err != nil {
				b.Fatal(err)
			}
			pool := testkit.PostgresPoolFor(b, u)
			if _, err := pool.Exec(ctx, fill, b.N, q); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE concurkit_outbox"); err != nil {
				b.Fatal(err)
			}
			store, err := outboxpg.New(pool, nil)
			if err != nil {
				b.Fatal(err)
			}
			pub, err := outboxamqp.New(func(context.Context) (*amqp.Connection, error) { return amqp.Dial(url) }, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = pub.Close() })
			relay, err := outbox.NewRelay(store, pub, &outbox.RelayConfig{BatchSize: size})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			published := 0
			for published < b.N {
				n, err := relay.Once(ctx)
				if err != nil || n == 0 {
					b.Fatalf("Once = %d, %v after %d of %d", n, err, published, b.N)
				}
				published += n
			}
			b.StopTimer()
			b.ReportMetric(float64(published)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkPublishLoop: the same client publishing the same 100-byte
// persistent, mandatory messages with confirms, in batches of 1, 10, 100
// (publish each, then wait for the batch's confirms), with no database:
// the ceiling of BenchmarkRelay.
func BenchmarkPublishLoop(b *testing.B) {
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			conn, prefix := testkit.AMQP(b)
			q := prefix + "_bench"
			testkit.AMQPQueue(b, conn, testkit.AMQPURL(b), q)
			ch, err := conn.Channel()
			if err != nil {
				b.Fatal(err)
			}
			if err := ch.Confirm(false); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 100)
			dcs := make([]*amqp.DeferredConfirmation, 0, size)
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				dcs = dcs[:0]
				for i := 0; i < size && sent < b.N; i, sent = i+1, sent+1 {
					dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false,
						amqp.Publishing{MessageId: outbox.NewID(), DeliveryMode: amqp.Persistent, Body: payload})
					if err != nil {
						b.Fatal(err)
					}
					dcs = append(dcs, dc)
				}
				for _, dc := range dcs {
					if ok, err := dc.WaitContext(ctx); !ok || err != nil {
						b.Fatalf("confirm: %v %v", ok, err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
