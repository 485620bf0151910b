package outboxpg_test

import (
	"context"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"testing"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/testkit"
)

// fill inserts n unpublished 100-byte messages in one statement.
const fill = `INSERT INTO concurkit_outbox (message_id, topic, message_key, payload, created_at)
SELECT gen_random_uuid()::text, 'bench', i::text, convert_to(repeat('x', 100), 'UTF8'), now()
FROM generate_series(1, $1) AS i`

// BenchmarkRelay measures one relay's throughput (rows published per
// second, with a publisher that does nothing) at batch sizes 1, 10 and
// 100: each batch is one transaction (BEGIN, claim, UPDATE, COMMIT), so
// the cost per row falls with the batch size. The outbox holds b.N rows,
// written before the timer starts.
func BenchmarkRelay(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			u := testkit.PostgresURL(b)
			if err := migrations.Up(ctx, migrations.Postgres, u); err != nil {
				b.Fatal(err)
			}
			pool := testkit.PostgresPoolFor(b, u)
			if _, err := pool.Exec(ctx, fill, b.N); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE concurkit_outbox"); err != nil {
				b.Fatal(err)
			}
			store, err := outboxpg.New(pool, nil)
			if err != nil {
				b.Fatal(err)
			}
			noop := outbox.PublisherFunc(func(context.Context, []outbox.Message) error { return nil })
			relay, err := outbox.NewRelay(store, noop, &outbox.RelayConfig{BatchSize: size})
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
			b.ReportMetric(float64(published)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
