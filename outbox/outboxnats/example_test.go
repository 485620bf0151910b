package outboxnats_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit/inbox/inboxnats"
	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxnats"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// The examples use the servers of scripts/services.sh (or
// CONCURKIT_POSTGRES_URL and CONCURKIT_NATS_URL): a schema and a stream
// of their own, removed afterwards. A missing server is printed, never
// fatal.

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// exampleSetup returns a pool on a fresh schema with the toolkit's tables
// and a totals table, a JetStream handle with a stream ORDERS_<n> on
// subject orders<n>.> and a durable consumer, and a cleanup.
func exampleSetup(ctx context.Context) (*pgxpool.Pool, jetstream.JetStream, jetstream.Consumer, string, func(), error) {
	n := rand.Uint32()
	var cleanups []func()
	done := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (*pgxpool.Pool, jetstream.JetStream, jetstream.Consumer, string, func(), error) {
		done()
		return nil, nil, nil, "", nil, err
	}
	base := env("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable")
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return fail(err)
	}
	schema := fmt.Sprintf("outboxnats_example_%d", n)
	cleanups = append(cleanups, func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = admin.Close(context.WithoutCancel(ctx))
	})
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fail(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return fail(err)
	}
	q := u.Query()
	q.Set("options", "-csearch_path="+schema)
	u.RawQuery = q.Encode()
	if err := migrations.Up(ctx, migrations.Postgres, u.String()); err != nil {
		return fail(err)
	}
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, pool.Close)
	if _, err := pool.Exec(ctx, "CREATE TABLE totals (charged bigint NOT NULL); INSERT INTO totals VALUES (0)"); err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(env("CONCURKIT_NATS_URL", "nats://127.0.0.1:14222"))
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return fail(err)
	}
	subject := fmt.Sprintf("orders%d", n)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprintf("ORDERS_%d", n), Subjects: []string{subject + ".>"}})
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = js.DeleteStream(context.WithoutCancel(ctx), stream.CachedInfo().Config.Name) })
	consumer, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return fail(err)
	}
	return pool, js, consumer, subject, done, nil
}

// An order's event goes from the business transaction through a relay to
// JetStream and is applied once by the consumer, through the inbox; the
// relay publishing it again (as after a crash before its mark) is dropped
// by JetStream as a duplicate.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, js, consumer, subject, cleanup, err := exampleSetup(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	// Producer: the event commits with the business transaction.
	err = pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
		_, err := outboxpg.Add(ctx, tx, outbox.Message{Topic: subject + ".created", Key: "o-1", Payload: []byte("o-1")})
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Relay and consumer. Messages JetStream refuses (too large, a bad
	// subject) go to keepForLater instead of blocking the relay.
	keepForLater := func(ctx context.Context, msg outbox.Message, reason error) error {
		fmt.Println("dead letter:", msg.ID, reason) // store it for a person to look at
		return nil
	}
	store, err := outboxpg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(ctx)
	go func() { // this example stops once the event is applied
		for charged := 0; charged == 0; time.Sleep(10 * time.Millisecond) {
			_ = pool.QueryRow(ctx, "SELECT charged FROM totals").Scan(&charged)
		}
		stop()
	}()
	pub, _ := outboxnats.New(js, &outboxnats.Config{DeadLetter: keepForLater}) // no I/O: only a nil js fails
	relay, _ := outbox.NewRelay(store, pub, nil)
	go relay.Run(ctx) // in each relay process: they claim rows with SKIP LOCKED
	err = inboxnats.Consume(ctx, consumer, func(ctx context.Context, id string, msg jetstream.Msg) error {
		_, err := inboxpg.Handle(ctx, pool, "billing", id, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE totals SET charged = charged + 10")
			return err
		})
		return err // acked only when nil: after the inbox committed
	}, nil)
	var charged int
	_ = pool.QueryRow(context.Background(), "SELECT charged FROM totals").Scan(&charged)
	fmt.Println("consumer:", err, "charged:", charged)

	// The relay publishing the event again (a crash before its mark): the
	// copy is dropped by JetStream, not delivered.
	var again outbox.Message
	_ = pool.QueryRow(context.Background(), "SELECT message_id, topic FROM concurkit_outbox").Scan(&again.ID, &again.Topic)
	err = pub.Publish(context.Background(), []outbox.Message{again})
	fmt.Println("published again:", err, "duplicates dropped:", pub.Stats().Duplicates)
	// Output:
	// consumer: context canceled charged: 10
	// published again: <nil> duplicates dropped: 1
}

// Subjects an outbox topic may become: a token may hold any printable
// character but '.', and the server's own API ($JS, $SYS, …) is refused,
// so that a topic never becomes an API call.
func ExampleValidateSubject() {
	for _, s := range []string{"orders.eu.created", "orders..created", "orders.*", "$JS.API.STREAM.DELETE.ORDERS"} {
		fmt.Println(s, outboxnats.ValidateSubject(s) == nil)
	}
	// Output:
	// orders.eu.created true
	// orders..created false
	// orders.* false
	// $JS.API.STREAM.DELETE.ORDERS false
}
