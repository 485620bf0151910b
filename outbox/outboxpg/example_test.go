package outboxpg_test

import (
	"context"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"math/rand/v2"
	"net/url"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// The examples connect to the server of scripts/services.sh (or
// CONCURKIT_POSTGRES_URL), apply the toolkit migrations in a schema of
// their own and drop it afterwards. A missing server fails the example,
// never the test binary.

func examplePool(ctx context.Context) (*pgxpool.Pool, func(), error) {
	base := os.Getenv("CONCURKIT_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, nil, err
	}
	schema := fmt.Sprintf("outbox_example_%d", rand.Uint32())
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = admin.Close(context.WithoutCancel(ctx))
	}
	u, err := url.Parse(base)
	if err == nil {
		q := u.Query()
		q.Set("options", "-csearch_path="+schema)
		u.RawQuery = q.Encode()
		_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	}
	if err == nil {
		err = migrations.Up(ctx, migrations.Postgres, u.String()) // creates concurkit_outbox, concurkit_inbox, …
	}
	var pool *pgxpool.Pool
	if err == nil {
		pool, err = pgxpool.New(ctx, u.String())
	}
	if err == nil {
		_, err = pool.Exec(ctx, "CREATE TABLE orders (id text PRIMARY KEY); CREATE TABLE shipments (order_id text PRIMARY KEY)")
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		drop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); drop() }, nil
}

// The order and its event commit together; a relay publishes the event;
// the consumer handles it with the inbox, so a second delivery of the same
// event (a relay crashed before marking it published, say) has no effect.
func ExampleAdd() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	// Producer: the business transaction writes the order and its event.
	err = pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ('o-1')"); err != nil {
			return err
		}
		_, err := outboxpg.Add(ctx, tx, outbox.Message{Topic: "orders", Key: "o-1", Payload: []byte("o-1")})
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Consumer: ships each order once, deduplicating on the message ID.
	consume := func(ctx context.Context, m outbox.Message) error {
		processed, err := inboxpg.Handle(ctx, pool, "shipping", m.ID, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES ($1)", string(m.Payload))
			return err
		})
		fmt.Println("deliver", m.Topic, m.Key, "processed:", processed)
		return err
	}

	// Relay: this publisher delivers every message twice, as an
	// at-least-once transport may.
	store, err := outboxpg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	twice := outbox.Each(func(ctx context.Context, m outbox.Message) error {
		if err := consume(ctx, m); err != nil {
			return err
		}
		return consume(ctx, m)
	})
	relay, err := outbox.NewRelay(store, twice, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	n, err := relay.Once(ctx)
	fmt.Println("relayed", n, err)

	var shipments int
	_ = pool.QueryRow(ctx, "SELECT count(*) FROM shipments").Scan(&shipments)
	pending, err := store.Pending(ctx)
	fmt.Println("shipments:", shipments, "pending:", pending, err)
	// Output:
	// deliver orders o-1 processed: true
	// deliver orders o-1 processed: false
	// relayed 1 <nil>
	// shipments: 1 pending: 0 <nil>
}
