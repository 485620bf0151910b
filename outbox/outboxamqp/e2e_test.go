package outboxamqp_test

import (
	"context"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit/inbox/inboxamqp"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/internal/e2etest"
	"github.com/concurkit/concurkit/outbox/outboxamqp"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) {
	if e2etest.IsChild() {
		e2etest.Child(rabbitBroker{})
	}
	os.Exit(m.Run())
}

// TestEndToEnd: business transactions → outbox → two relays → RabbitMQ
// (confirms, mandatory; no broker dedup) → inboxamqp consumer → inbox, on
// PostgreSQL and MariaDB, with relays killed after publishing, the broker
// restarted and frozen, the consumer killed after committing, and publish
// confirms dropped: every effect exactly once, nothing unpublished.
// CONCURKIT_E2E_EVENTS=10000 for the long run, which covers both
// databases; the CI-sized run covers PostgreSQL only (each run starts and
// restarts a throwaway RabbitMQ, 15–25 s apiece on a loaded machine: the
// NATS run covers MariaDB in CI).
func TestEndToEnd(t *testing.T) {
	dbs := []string{e2etest.Postgres}
	if os.Getenv(e2etest.EnvEvents) != "" {
		dbs = append(dbs, e2etest.MariaDB)
	}
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) { e2etest.Run(t, rabbitBroker{}, db) })
	}
}

// rabbitBroker runs the end-to-end test on a throwaway RabbitMQ node:
// durable queue e2e, reached through the default exchange.
type rabbitBroker struct{}

func (rabbitBroker) Name() string                     { return "RabbitMQ" }
func (rabbitBroker) Start(t testing.TB) *testkit.Proc { return testkit.StartRabbitMQ(t) }
func (rabbitBroker) Topic() string                    { return "e2e" }

func dial(addr string) (*amqp.Connection, error) {
	return amqp.DialConfig("amqp://guest:guest@"+addr+"/", amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
}

func (rabbitBroker) Setup(ctx context.Context, addr string) error {
	conn, err := dial(addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	_, err = ch.QueueDeclare("e2e", true, false, false, false, nil)
	return err
}

func (rabbitBroker) Publisher(ctx context.Context, addr string) (outbox.Publisher, func() int64, func(), error) {
	p, err := outboxamqp.New(func(context.Context) (*amqp.Connection, error) { return dial(addr) }, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return p, nil, func() { _ = p.Close() }, nil
}

func (rabbitBroker) Consume(ctx context.Context, addr string, apply func(ctx context.Context, id string, body []byte) error) error {
	cfg := &inboxamqp.Config{RetryDelay: 100 * time.Millisecond}
	for {
		conn, err := dial(addr)
		if err == nil {
			var ch *amqp.Channel
			if ch, err = conn.Channel(); err == nil {
				if err = ch.Qos(50, 0, false); err == nil {
					err = inboxamqp.Consume(ctx, ch, "e2e", func(ctx context.Context, id string, d amqp.Delivery) error {
						return apply(ctx, id, d.Body)
					}, cfg)
				}
			}
			_ = conn.Close()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
}
