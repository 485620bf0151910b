package outboxnats_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxnats"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/testkit"
)

// fill inserts n unpublished 100-byte events in one statement.
const fill = `INSERT INTO concurkit_outbox (message_id, topic, message_key, payload, created_at)
SELECT gen_random_uuid()::text, $2, i::text, convert_to(repeat('x', 100), 'UTF8'), now()
FROM generate_series(1, $1) AS i`

// BenchmarkRelay: one relay moving events from a PostgreSQL outbox to
// JetStream (file storage, the project's NATS), at batch sizes 1, 10 and
// 100: each batch is one claim transaction and one PublishMsgAsync per
// event, waiting for all acks before the mark. Compare with
// BenchmarkPublishLoop (same batches, no database): the ceiling.
func BenchmarkRelay(b *testing.B) {
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			js, prefix := testkit.NATS(b)
			benchStream(b, js, prefix)
			u := testkit.PostgresURL(b)
			if err := migrations.Up(ctx, migrations.Postgres, u); err != nil {
				b.Fatal(err)
			}
			pool := testkit.PostgresPoolFor(b, u)
			if _, err := pool.Exec(ctx, fill, b.N, prefix+".bench"); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE concurkit_outbox"); err != nil {
				b.Fatal(err)
			}
			store, err := outboxpg.New(pool, nil)
			if err != nil {
				b.Fatal(err)
			}
			pub, err := outboxnats.New(js, nil)
			if err != nil {
				b.Fatal(err)
			}
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
// messages (with Nats-Msg-Id) in batches of 1, 10, 100 — PublishMsgAsync
// each, then wait for the batch's acks — with no database: the ceiling
// of BenchmarkRelay.
func BenchmarkPublishLoop(b *testing.B) {
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			js, prefix := testkit.NATS(b)
			benchStream(b, js, prefix)
			payload := make([]byte, 100)
			futures := make([]jetstream.PubAckFuture, 0, size)
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				futures = futures[:0]
				for i := 0; i < size && sent < b.N; i, sent = i+1, sent+1 {
					m := &nats.Msg{Subject: prefix + ".bench", Data: payload, Header: nats.Header{jetstream.MsgIDHeader: {outbox.NewID()}}}
					f, err := js.PublishMsgAsync(m)
					if err != nil {
						b.Fatal(err)
					}
					futures = append(futures, f)
				}
				for _, f := range futures {
					select {
					case <-f.Ok():
					case err := <-f.Err():
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func benchStream(b *testing.B, js jetstream.JetStream, prefix string) {
	b.Helper()
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: prefix + "_bench", Subjects: []string{prefix + ".>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		b.Fatal(err)
	}
}
