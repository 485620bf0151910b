package outboxnats_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit/inbox/inboxnats"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/internal/e2etest"
	"github.com/concurkit/concurkit/outbox/outboxnats"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) {
	if e2etest.IsChild() {
		e2etest.Child(natsBroker{})
	}
	os.Exit(m.Run())
}

// TestEndToEnd: business transactions → outbox → two relays →
// JetStream (Nats-Msg-Id dedup) → inboxnats consumer → inbox, on
// PostgreSQL and MariaDB, with relays killed after publishing, the broker
// restarted and frozen, the consumer killed after committing, and publish
// acks dropped: every effect exactly once, nothing unpublished.
// CONCURKIT_E2E_EVENTS=10000 for the long run.
func TestEndToEnd(t *testing.T) {
	for _, db := range []string{e2etest.Postgres, e2etest.MariaDB} {
		t.Run(db, func(t *testing.T) { e2etest.Run(t, natsBroker{}, db) })
	}
}

// natsBroker runs the end-to-end test on a throwaway nats-server: stream
// E2E (file storage, 2-minute duplicate window) on e2e.>, durable pull
// consumer e2e (AckWait 3 s).
type natsBroker struct{}

func (natsBroker) Name() string                     { return "NATS JetStream" }
func (natsBroker) Start(t testing.TB) *testkit.Proc { return testkit.StartNATS(t) }
func (natsBroker) Topic() string                    { return "e2e.events" }

func connect(addr string) (*nats.Conn, error) {
	return nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.RetryOnFailedConnect(true))
}

func (natsBroker) Setup(ctx context.Context, addr string) error {
	nc, err := connect(addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "E2E", Subjects: []string{"e2e.>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		return err
	}
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "e2e", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second, MaxDeliver: -1})
	return err
}

func (natsBroker) Publisher(ctx context.Context, addr string) (outbox.Publisher, func() int64, func(), error) {
	nc, err := connect(addr)
	if err != nil {
		return nil, nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return nil, nil, nil, err
	}
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return pub, func() int64 { return pub.Stats().Duplicates }, nc.Close, nil
}

func (natsBroker) Consume(ctx context.Context, addr string, apply func(ctx context.Context, id string, body []byte) error) error {
	nc, err := connect(addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := &inboxnats.Config{NakDelay: 100 * time.Millisecond, Pull: []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(50)}}
	for {
		c, err := js.Consumer(ctx, "E2E", "e2e")
		if err == nil {
			err = inboxnats.Consume(ctx, c, func(ctx context.Context, id string, msg jetstream.Msg) error {
				return apply(ctx, id, msg.Data())
			}, cfg)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
}
