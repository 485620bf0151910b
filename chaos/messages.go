package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxamqp"
	"github.com/concurkit/concurkit/inbox/inboxnats"
	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxamqp"
	"github.com/concurkit/concurkit/outbox/outboxnats"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// messagesWorkload is the messaging chain: outbox → relay → broker →
// consumer → inbox. Every client process runs three loops at once:
//
//   - a producer: in one PostgreSQL transaction (pessimisticpg.InTx) it
//     inserts a business row and adds an event with a fresh id to the
//     outbox (outboxpg), then paces itself;
//   - a relay (outbox.Relay) that publishes the outbox to the broker:
//     NATS JetStream (outboxnats, a stream named after the run, whose
//     duplicate window drops a relay's re-publish) or RabbitMQ
//     (outboxamqp, a durable queue named after the run, with publisher
//     confirms and no dedup);
//   - a consumer (inboxnats.Consume on a durable pull consumer, or
//     inboxamqp.Consume on the queue) that applies each delivery — an
//     effect row (event id, process) — through inboxpg.Handle, thinks,
//     and returns, after which the message is acknowledged.
//
// Unsafe (the negative control) is an outbox without the inbox: the
// consumer inserts the effect directly, so every redelivery of an event
// it had applied — a consumer killed or cut off between its effect and
// its ack, paused past the NATS AckWait, a relay that published and died
// before marking its batch — is a second effect. The think between the
// effect and the ack is the same in both modes: it is the window where
// those faults land, and the comparison is fair only if the safe consumer
// has it too.
//
// Every nemesis the run's servers allow applies: kills and pauses hit
// producers, relays and consumers mid-flight, PostgreSQL and the broker
// each have a proxy, and PostgreSQL sessions can be terminated.
//
// Nothing stranded needs a drain: the client processes stop when the run
// ends, with events still in the outbox or the broker. The checker first
// runs a relay and a consumer in the controller (process 0, direct
// endpoints, no faults, the same code and mode) until every committed
// event has an effect, the outbox has nothing unpublished and the broker
// nothing undelivered or unacknowledged — or until the "drain" bound
// passes — and then reports, per event id:
//   - duplicate-effect: more than one effect;
//   - lost: a committed event (an acknowledged send, or a row in the
//     outbox) with no effect, its outbox row published (or missing);
//   - stranded: the same, its outbox row still unpublished;
//   - phantom: a send that failed whose event committed or took effect,
//     or an effect of an event that never committed;
//   - torn: a business row without its outbox row or the reverse (the
//     producer's transaction did not commit as one);
//   - unknown-event: an outbox row or an effect of an id no client sent.
//
// Sends whose COMMIT got no answer, or whose process was killed, are
// ambiguous: their event may or may not have committed, and the outbox
// table says which, so they are held to the same rule once it does.
//
// History: a "send" per business transaction (Key: the event id; OK when
// COMMIT returned, Fail when the transaction failed before COMMIT,
// Unknown when COMMIT's answer was lost); a "publish" per message per
// publish attempt (OK when the publisher returned nil for its batch,
// Unknown otherwise: the broker may have it); an "apply" per delivery
// handled (Arg: the delivery's number — JetStream counts them, RabbitMQ
// only flags a redelivery, recorded as 2; Ret: 1 when the effect
// committed, 0 when the inbox found the id and refused it; Fail or
// Unknown when the handler failed, as for a send).
//
// Options (env.Options; unknown keys are left to other workloads):
//   - pace: the longest random pause between a producer's sends, a
//     time.ParseDuration value; default msgsPace.
//   - think: the longest random pause between a consumer's effect and its
//     ack; default msgsThink.
//   - drain: how long the checker drains at most; default msgsDrain.
type messagesWorkload struct{}

var _ workload = messagesWorkload{}

// Settings of the messages workload.
const (
	// msgsPace is the default of Options["pace"]: producers send about
	// every 10 ms, well within what the consumers apply, so that the
	// backlog at the end is the faults' doing.
	msgsPace = 20 * time.Millisecond
	// msgsThink is the default of Options["think"]: the work a consumer
	// does between committing its effect and acknowledging the message,
	// where a kill or a cut connection leaves an applied message
	// unacknowledged.
	msgsThink = 5 * time.Millisecond
	// msgsDrain is the default of Options["drain"].
	msgsDrain = 30 * time.Second
	// msgsConsumer is the consumer's name: the inbox's scope and the
	// JetStream durable consumer's name.
	msgsConsumer = "chaos"
	// msgsBatch is the relays' batch size: small, so that a relay killed
	// mid-batch leaves a few messages to publish again, not a hundred.
	msgsBatch = 10
	// msgsPoll is the relays' poll interval once the outbox is drained.
	msgsPoll = 50 * time.Millisecond
	// msgsPrefetch bounds the messages a consumer holds unacknowledged
	// (JetStream pull batch, RabbitMQ prefetch): the AckWait of a
	// prefetched JetStream message runs while it waits its turn.
	msgsPrefetch = 4
	// msgsRetry is the pause between a consumer's reconnections, and its
	// NakDelay and RetryDelay after a handler error.
	msgsRetry = 100 * time.Millisecond
	// msgsDrainPoll is how often the drain checks whether it is done.
	msgsDrainPoll = 100 * time.Millisecond
)

// msgsAckWait is the JetStream consumer's AckWait: twice the TTL, so that
// the longer pauses (1–3× the TTL) outlive it and their messages are
// redelivered to another consumer while the paused one still holds them.
func msgsAckWait(ttl time.Duration) time.Duration { return 2 * ttl }

// msgsOptions are the workload's parsed Options.
type msgsOptions struct {
	pace, think, drain time.Duration
}

// parseMsgsOptions reads the workload's options (see messagesWorkload).
func parseMsgsOptions(opts map[string]string) (msgsOptions, error) {
	o := msgsOptions{pace: msgsPace, think: msgsThink, drain: msgsDrain}
	for _, f := range []struct {
		name string
		to   *time.Duration
	}{{"pace", &o.pace}, {"think", &o.think}, {"drain", &o.drain}} {
		v, ok := opts[f.name]
		if !ok {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return o, fmt.Errorf("%w: messages option %s=%q: want a duration such as 20ms", ErrInvalidConfig, f.name, v)
		}
		*f.to = d
	}
	return o, nil
}

// systems: PostgreSQL holds the outbox, the inbox and the effects; the
// backend is the broker.
func (messagesWorkload) systems(backend string) ([]string, error) {
	switch backend {
	case "nats", "amqp":
		return []string{"postgres", backend}, nil
	}
	return nil, fmt.Errorf("messages backend %q (want nats or amqp)", backend)
}

// Statements; %[1]s is the run's schema (an identifier made by resolve,
// never input). Effects have no key on the event: a second application is
// a second row, which is what the checker looks for.
const (
	msgsCreate = `CREATE TABLE %[1]s.orders (event text PRIMARY KEY, process int NOT NULL);
CREATE TABLE %[1]s.effects (n bigserial PRIMARY KEY, event text NOT NULL, process int NOT NULL, delivery int NOT NULL);
CREATE INDEX ON %[1]s.effects (event)`
	msgsOrder        = `INSERT INTO %[1]s.orders (event, process) VALUES ($1, $2)`
	msgsInsertEffect = `INSERT INTO %[1]s.effects (event, process, delivery) VALUES ($1, $2, $3)`
	// msgsBacklog counts the outbox's unpublished rows and its events
	// without an effect: the drain is done when both are 0.
	msgsBacklog = `SELECT (SELECT count(*) FROM %[1]s.concurkit_outbox WHERE published_at IS NULL),
	(SELECT count(*) FROM %[1]s.concurkit_outbox o WHERE NOT EXISTS (SELECT 1 FROM %[1]s.effects f WHERE f.event = o.message_id))`
	msgsOutboxRows = `SELECT message_id, published_at IS NOT NULL FROM %[1]s.concurkit_outbox`
	msgsOrderRows  = `SELECT event FROM %[1]s.orders`
	msgsEffectRows = `SELECT event, process FROM %[1]s.effects ORDER BY n`
)

// msgsMigration is the toolkit migration that creates the outbox and
// inbox tables, run in the run's schema so that the tables are exactly
// the ones outboxpg and inboxpg are built for.
const msgsMigration = "0003_messaging.up.sql"

// setup creates the run's schema (outbox, inbox, business rows, effects)
// and the broker's stream and consumer (NATS) or queue (RabbitMQ). Bad
// options fail here, before any client starts.
func (messagesWorkload) setup(ctx context.Context, e *env) error {
	if _, err := parseMsgsOptions(e.Options); err != nil {
		return err
	}
	if err := createScope(ctx, e, "postgres", []string{msgsMigration}, msgsCreate); err != nil {
		return err
	}
	switch e.Backend {
	case "nats":
		return msgsSetupNATS(ctx, e)
	case "amqp":
		return msgsSetupAMQP(ctx, e)
	}
	return fmt.Errorf("chaos: messages backend %q", e.Backend)
}

// teardown drops the run's schema and its stream or queue.
func (messagesWorkload) teardown(ctx context.Context, e *env) error {
	errs := []error{dropScope(ctx, e, "postgres")}
	switch e.Backend {
	case "nats":
		nc, err := nats.Connect(e.Endpoints.NATS, nats.Timeout(opTimeout(e.TTL)))
		if err == nil {
			var js jetstream.JetStream
			if js, err = jetstream.New(nc); err == nil {
				err = js.DeleteStream(ctx, e.Run)
			}
			nc.Close()
		}
		errs = append(errs, err)
	case "amqp":
		conn, err := msgsDialAMQP(e.Endpoints.AMQP, opTimeout(e.TTL))
		if err == nil {
			var ch *amqp.Channel
			if ch, err = conn.Channel(); err == nil {
				_, err = ch.QueueDelete(e.Run, false, false, false)
			}
			_ = conn.Close()
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// msgsSetupNATS creates the run's stream (subjects "<run>.>", file
// storage, the default 2-minute duplicate window) and its durable pull
// consumer (explicit acks, AckWait msgsAckWait, unlimited deliveries).
func msgsSetupNATS(ctx context.Context, e *env) error {
	nc, err := nats.Connect(e.Endpoints.NATS, nats.Timeout(opTimeout(e.TTL)))
	if err != nil {
		return fmt.Errorf("chaos: nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("chaos: nats: %w", err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.Run, Subjects: []string{e.Run + ".>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return fmt.Errorf("chaos: create stream: %w", err)
	}
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: msgsConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: msgsAckWait(e.TTL), MaxDeliver: -1,
	})
	if err != nil {
		return fmt.Errorf("chaos: create consumer: %w", err)
	}
	return nil
}

// msgsSetupAMQP declares the run's durable queue; the relays publish to
// it through the default exchange (routing key = queue name).
func msgsSetupAMQP(_ context.Context, e *env) error {
	conn, err := msgsDialAMQP(e.Endpoints.AMQP, opTimeout(e.TTL))
	if err != nil {
		return fmt.Errorf("chaos: amqp: %w", err)
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("chaos: amqp: %w", err)
	}
	if _, err := ch.QueueDeclare(e.Run, true, false, false, false, nil); err != nil {
		return fmt.Errorf("chaos: declare queue: %w", err)
	}
	return nil
}

// msgsDialAMQP dials url with timeout bounding the TCP connection and
// the AMQP handshake, which a frozen broker would otherwise hold forever.
func msgsDialAMQP(url string, timeout time.Duration) (*amqp.Connection, error) {
	return amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(timeout)})
}

// msgsTopic is the outbox topic of the run's events: a subject the stream
// captures (NATS) or the queue's name (RabbitMQ, default exchange).
func msgsTopic(e *env) string {
	if e.Backend == "nats" {
		return e.Run + ".events"
	}
	return e.Run
}

// msgsApply handles one delivery of event id; delivery is its number (1
// for the first). It returns nil once the message may be acknowledged.
type msgsApply func(ctx context.Context, id string, delivery int) error

// msgsBroker is the broker side of one process: what the relay publishes
// through and what the consumer reads from.
type msgsBroker interface {
	// publisher returns the outbox publisher.
	publisher() outbox.Publisher
	// consume hands deliveries to apply, one at a time, and acknowledges
	// those it returned nil for, reconnecting after failures, until ctx
	// ends.
	consume(ctx context.Context, apply msgsApply)
	// idle reports whether the broker holds no message still to be
	// delivered or acknowledged (the drain's last condition).
	idle(ctx context.Context) (bool, error)
	// close releases the broker's connections.
	close()
}

// openMsgsBroker connects to e's broker. It does not fail on an
// unreachable broker (a client restarted during a fault must not die of
// it): connections are retried as the loops need them.
func openMsgsBroker(e *env) (msgsBroker, error) {
	timeout := opTimeout(e.TTL)
	switch e.Backend {
	case "nats":
		// Reconnect forever, quickly, and notice a stalled server within
		// a few seconds rather than the default two minutes of pings.
		nc, err := nats.Connect(e.Endpoints.NATS, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
			nats.RetryOnFailedConnect(true), nats.Timeout(timeout), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(3))
		if err != nil {
			return nil, fmt.Errorf("chaos: nats: %w", err)
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(timeout))
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("chaos: nats: %w", err)
		}
		pub, err := outboxnats.New(js, nil)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &msgsNATS{nc: nc, js: js, pub: pub, stream: e.Run, timeout: timeout}, nil
	case "amqp":
		url := e.Endpoints.AMQP
		pub, err := outboxamqp.New(func(context.Context) (*amqp.Connection, error) { return msgsDialAMQP(url, timeout) }, nil)
		if err != nil {
			return nil, err
		}
		return &msgsAMQP{url: url, queue: e.Run, pub: pub, timeout: timeout}, nil
	}
	return nil, fmt.Errorf("chaos: messages backend %q", e.Backend)
}

// msgsNATS is the JetStream side: the run's stream and durable consumer.
type msgsNATS struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	pub     *outboxnats.Publisher
	stream  string
	timeout time.Duration
}

// publisher returns the outboxnats publisher (Nats-Msg-Id = the event
// id, so the stream's duplicate window drops a relay's re-publish).
func (b *msgsNATS) publisher() outbox.Publisher { return b.pub }

// consume pulls from the durable consumer with inboxnats.Consume, the
// delivery's number taken from its metadata, and subscribes again when
// the subscription fails.
func (b *msgsNATS) consume(ctx context.Context, apply msgsApply) {
	cfg := &inboxnats.Config{NakDelay: msgsRetry, Pull: []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(msgsPrefetch)}}
	handle := func(ctx context.Context, id string, msg jetstream.Msg) error {
		n := 1
		if md, err := msg.Metadata(); err == nil {
			n = int(md.NumDelivered)
		}
		return apply(ctx, id, n)
	}
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, b.timeout)
		c, err := b.js.Consumer(lctx, b.stream, msgsConsumer)
		cancel()
		if err == nil {
			_ = inboxnats.Consume(ctx, c, handle, cfg)
		}
		sleepCtx(ctx, msgsRetry)
	}
}

// idle reports whether the durable consumer has nothing undelivered and
// nothing delivered but unacknowledged (a dead client's messages count
// until their AckWait ends and they are redelivered).
func (b *msgsNATS) idle(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	c, err := b.js.Consumer(ctx, b.stream, msgsConsumer)
	if err != nil {
		return false, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return false, err
	}
	return info.NumPending == 0 && info.NumAckPending == 0, nil
}

// close closes the NATS connection.
func (b *msgsNATS) close() { b.nc.Close() }

// msgsAMQP is the RabbitMQ side: the run's queue.
type msgsAMQP struct {
	url     string
	queue   string
	pub     *outboxamqp.Publisher
	timeout time.Duration

	admin *amqp.Connection // idle's, opened when first needed
}

// publisher returns the outboxamqp publisher (confirms, mandatory; the
// broker keeps every copy a relay publishes).
func (b *msgsAMQP) publisher() outbox.Publisher { return b.pub }

// consume reads the queue with inboxamqp.Consume on a connection of its
// own (prefetch msgsPrefetch), and reconnects when the channel or the
// connection closes. RabbitMQ only flags a redelivery: it is recorded as
// delivery 2.
func (b *msgsAMQP) consume(ctx context.Context, apply msgsApply) {
	cfg := &inboxamqp.Config{RetryDelay: msgsRetry}
	handle := func(ctx context.Context, id string, d amqp.Delivery) error {
		n := 1
		if d.Redelivered {
			n = 2
		}
		return apply(ctx, id, n)
	}
	for ctx.Err() == nil {
		conn, err := msgsDialAMQP(b.url, b.timeout)
		if err == nil {
			var ch *amqp.Channel
			if ch, err = conn.Channel(); err == nil {
				if err = ch.Qos(msgsPrefetch, 0, false); err == nil {
					_ = inboxamqp.Consume(ctx, ch, b.queue, handle, cfg)
				}
			}
			// Closing waits for the broker's answer: bounded, since a
			// frozen broker never gives one.
			_ = conn.CloseDeadline(time.Now().Add(b.timeout))
		}
		sleepCtx(ctx, msgsRetry)
	}
}

// idle reports whether the queue has no ready message. Messages a
// consumer holds unacknowledged are not counted: the drain's consumer
// is the only one left, and a dead client's are requeued as ready.
func (b *msgsAMQP) idle(context.Context) (bool, error) {
	if b.admin == nil || b.admin.IsClosed() {
		conn, err := msgsDialAMQP(b.url, b.timeout)
		if err != nil {
			return false, err
		}
		b.admin = conn
	}
	ch, err := b.admin.Channel()
	if err != nil {
		return false, err
	}
	defer func() { _ = ch.Close() }()
	q, err := ch.QueueDeclarePassive(b.queue, true, false, false, false, nil)
	if err != nil {
		return false, err
	}
	return q.Messages == 0, nil
}

// close closes the publisher and idle's connection.
func (b *msgsAMQP) close() {
	_ = b.pub.Close()
	if b.admin != nil {
		_ = b.admin.CloseDeadline(time.Now().Add(b.timeout))
	}
}

// msgsNode is one process's part of the chain, in a client process or in
// the checker's drain: its tables, outbox, inbox and broker.
type msgsNode struct {
	c      *client
	o      msgsOptions
	pool   *pgxpool.Pool
	store  *outboxpg.Store
	inbox  *inboxpg.Inbox // nil when unsafe: no dedup
	broker msgsBroker
	order  string // msgsOrder for the run
	effect string // msgsInsertEffect for the run
}

// openMsgsNode opens c's connections: none is made yet (pgxpool and the
// brokers connect lazily, and retry), so a client started during a fault
// does not fail.
func openMsgsNode(ctx context.Context, c *client) (*msgsNode, error) {
	o, err := parseMsgsOptions(c.Options)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, c.Endpoints.Postgres)
	if err != nil {
		return nil, fmt.Errorf("chaos: postgres: %w", err)
	}
	n := &msgsNode{c: c, o: o, pool: pool, order: fmt.Sprintf(msgsOrder, c.Run), effect: fmt.Sprintf(msgsInsertEffect, c.Run)}
	if n.store, err = outboxpg.New(pool, &outbox.Config{Table: outbox.Table{Schema: c.Run}}); err != nil {
		pool.Close()
		return nil, err
	}
	if !c.Unsafe {
		t := inbox.Table{Schema: c.Run}
		if n.inbox, err = inboxpg.New(pool, &inbox.Config{Table: t, SequenceTable: t}); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if n.broker, err = openMsgsBroker(&c.env); err != nil {
		pool.Close()
		return nil, err
	}
	return n, nil
}

// close releases the node's connections.
func (n *msgsNode) close() {
	n.broker.close()
	n.pool.Close()
}

// relay runs an outbox relay to the broker until ctx ends, recording
// each message it publishes.
func (n *msgsNode) relay(ctx context.Context) error {
	r, err := outbox.NewRelay(n.store, msgsRecorder{n.c, n.broker.publisher()}, &outbox.RelayConfig{
		BatchSize: msgsBatch, PollInterval: msgsPoll, PublishTimeout: opTimeout(n.c.TTL),
		RetryDelay: 10 * time.Millisecond, MaxRetryDelay: n.c.TTL,
	})
	if err != nil {
		return err
	}
	_ = r.Run(ctx) // returns ctx.Err() only: it never gives up on errors
	return nil
}

// consume runs the consumer until ctx ends. Its random think is drawn
// from a source of its own: the producer draws from c.rng at the same
// time.
func (n *msgsNode) consume(ctx context.Context) {
	rng := rand.New(rand.NewPCG(n.c.Seed, uint64(n.c.process)<<32|0x6d))
	n.broker.consume(ctx, func(ctx context.Context, id string, delivery int) error {
		return n.apply(ctx, id, delivery, rng)
	})
}

// apply makes the effect of event id (through the inbox unless unsafe),
// records it, and thinks before handing the message back to be
// acknowledged.
func (n *msgsNode) apply(ctx context.Context, id string, delivery int, rng *rand.Rand) error {
	c := n.c
	op := c.invoke(Op{Kind: "apply", Key: id, Arg: int64(delivery)})
	actx, cancel := context.WithTimeout(ctx, opTimeout(c.TTL))
	defer cancel()
	var applied bool
	var err error
	if n.inbox == nil {
		_, err = n.pool.Exec(actx, n.effect, id, c.process, delivery)
		applied = err == nil
	} else {
		applied, err = n.inbox.Handle(actx, msgsConsumer, id, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, n.effect, id, c.process, delivery)
			return err
		})
	}
	if err != nil {
		c.complete(op, msgsFailure(err, n.inbox == nil), err)
		return err // not acknowledged: redelivered
	}
	if applied {
		op.Ret = 1
	}
	c.complete(op, OK, nil)
	if t := time.Duration(rng.Int64N(int64(n.o.think) + 1)); t > 0 {
		sleepCtx(ctx, t)
	}
	return nil
}

// msgsFailure says what a failed write left behind. In a transaction
// (pessimisticpg.InTx: the producer's, the inbox's) only a COMMIT whose
// answer was lost may have committed, and InTx reports it as ambiguous;
// an autocommit statement (the unsafe effect) certainly did not commit
// only when the server answered with an error or nothing was sent.
func msgsFailure(err error, autocommit bool) Outcome {
	if errors.Is(err, concurkit.ErrOutcomeUnknown) {
		return Unknown
	}
	if autocommit {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err) {
			return Unknown
		}
	}
	return Fail
}

// produce sends events until ctx ends: each a business row and its
// outbox event in one transaction, then a random pause up to the pace.
func (n *msgsNode) produce(ctx context.Context) {
	c := n.c
	topic := msgsTopic(&c.env)
	for i := 1; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("%s-%d-%d", c.Run, c.process, i)
		op := c.invoke(Op{Kind: "send", Key: id})
		sctx, cancel := context.WithTimeout(ctx, opTimeout(c.TTL))
		err := pessimisticpg.InTx(sctx, n.pool, nil, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, n.order, id, c.process); err != nil {
				return err
			}
			_, err := n.store.Add(ctx, tx, outbox.Message{ID: id, Topic: topic, Payload: []byte(id)})
			return err
		})
		cancel()
		if err != nil {
			c.complete(op, msgsFailure(err, false), err)
		} else {
			c.complete(op, OK, nil)
		}
		if t := time.Duration(c.rng.Int64N(int64(n.o.pace) + 1)); t > 0 {
			sleepCtx(ctx, t)
		}
	}
}

// msgsRecorder records a "publish" of each message of a batch around the
// real publisher: OK when the batch was accepted, Unknown when it failed
// (the broker may have some of it).
type msgsRecorder struct {
	c   *client
	pub outbox.Publisher
}

// Publish implements outbox.Publisher.
func (r msgsRecorder) Publish(ctx context.Context, msgs []outbox.Message) error {
	ops := make([]Op, len(msgs))
	for i, m := range msgs {
		ops[i] = r.c.invoke(Op{Kind: "publish", Key: m.ID})
	}
	err := r.pub.Publish(ctx, msgs)
	o := OK
	if err != nil {
		o = Unknown
	}
	for _, op := range ops {
		r.c.complete(op, o, err)
	}
	return err
}

// client runs the producer, the relay and the consumer of one process
// until ctx ends.
func (messagesWorkload) client(ctx context.Context, c *client) error {
	n, err := openMsgsNode(ctx, c)
	if err != nil {
		return err
	}
	defer n.close()
	var wg sync.WaitGroup
	wg.Go(func() { n.produce(ctx) })
	wg.Go(func() { _ = n.relay(ctx) })
	wg.Go(func() { n.consume(ctx) })
	wg.Wait()
	return nil
}

// msgsDrained is what the drain did.
type msgsDrained struct {
	took time.Duration
	done bool // everything delivered before the bound
	ops  []Op // the drain's own operations (process 0)
	// unpublished and unapplied are the last backlog seen: outbox rows
	// not published, committed events without an effect.
	unpublished, unapplied int64
	// err is the last error of the drain's checks, if they failed.
	err error
}

// drainMessages runs a relay and a consumer as process 0 on the direct endpoints,
// in the run's mode, until every committed event has an effect and
// neither the outbox nor the broker holds anything, or until the bound.
func drainMessages(ctx context.Context, e *env, o msgsOptions) (*msgsDrained, error) {
	var out bytes.Buffer // the client writes it under its own lock
	c := &client{env: *e, process: 0, out: &out, rng: rand.New(rand.NewPCG(e.Seed, 0))}
	n, err := openMsgsNode(ctx, c)
	if err != nil {
		return nil, err
	}
	defer n.close()
	start := time.Now()
	dctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.relay(dctx) })
	wg.Go(func() { n.consume(dctx) })
	d := &msgsDrained{}
	backlog := fmt.Sprintf(msgsBacklog, e.Run)
	deadline := start.Add(o.drain)
	// Done twice in a row: RabbitMQ does not count the messages the
	// drain's consumer holds prefetched, which the pause in between lets
	// it handle (in the unsafe run, they may be duplicates to find).
	for settled := 0; ; {
		d.err = n.pool.QueryRow(ctx, backlog).Scan(&d.unpublished, &d.unapplied)
		idle := false
		if d.err == nil && d.unpublished == 0 && d.unapplied == 0 {
			idle, d.err = n.broker.idle(ctx)
		}
		if idle && d.err == nil {
			settled++
		} else {
			settled = 0
		}
		if settled == 2 {
			d.done = true
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, msgsDrainPoll)
	}
	d.took = time.Since(start)
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	d.ops, err = ReadHistory(&out)
	c.mu.Unlock()
	return d, err
}

// msgsState is what storage holds after the drain.
type msgsState struct {
	// outbox maps each committed event's id to whether its row was
	// published.
	outbox map[string]bool
	// orders are the committed business rows' event ids.
	orders map[string]bool
	// effects are the applied effects, in commit order, one per
	// application.
	effects []msgsEffect
}

// msgsEffect is one applied effect.
type msgsEffect struct {
	Event   string
	Process int // 0: the checker's drain
}

// readMsgsState reads the outbox, the business rows and the effects.
func readMsgsState(ctx context.Context, e *env) (msgsState, error) {
	st := msgsState{outbox: map[string]bool{}, orders: map[string]bool{}}
	conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
	if err != nil {
		return st, fmt.Errorf("chaos: postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, fmt.Sprintf(msgsOutboxRows, e.Run))
	if err != nil {
		return st, fmt.Errorf("chaos: read outbox: %w", err)
	}
	var id string
	var published bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &published}, func() error { st.outbox[id] = published; return nil }); err != nil {
		return st, fmt.Errorf("chaos: read outbox: %w", err)
	}
	if rows, err = conn.Query(ctx, fmt.Sprintf(msgsOrderRows, e.Run)); err != nil {
		return st, fmt.Errorf("chaos: read orders: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { st.orders[id] = true; return nil }); err != nil {
		return st, fmt.Errorf("chaos: read orders: %w", err)
	}
	if rows, err = conn.Query(ctx, fmt.Sprintf(msgsEffectRows, e.Run)); err != nil {
		return st, fmt.Errorf("chaos: read effects: %w", err)
	}
	if st.effects, err = pgx.CollectRows(rows, pgx.RowToStructByPos[msgsEffect]); err != nil {
		return st, fmt.Errorf("chaos: read effects: %w", err)
	}
	return st, nil
}

// check drains the chain, reads what storage holds and judges the
// history (the clients' and the drain's operations) against it.
func (messagesWorkload) check(ctx context.Context, e *env, ops []Op) (*Report, error) {
	o, err := parseMsgsOptions(e.Options)
	if err != nil {
		return nil, err
	}
	d, err := drainMessages(ctx, e, o)
	if err != nil {
		return nil, fmt.Errorf("chaos: drain: %w", err)
	}
	st, err := readMsgsState(ctx, e)
	if err != nil {
		return nil, err
	}
	r := checkMessages(slices.Concat(ops, d.ops), st)
	if d.done {
		r.note("drain: everything delivered in %s", d.took.Round(time.Millisecond))
	} else {
		r.note("drain: NOT finished after %s (bound %s): %d outbox rows unpublished, %d committed events without an effect, or the broker not empty; last error: %v",
			d.took.Round(time.Millisecond), o.drain, d.unpublished, d.unapplied, d.err)
	}
	return r, nil
}

// msgsTally is what a history of the messages workload shows.
type msgsTally struct {
	sends     map[string]Op // by event id
	outcomes  map[Outcome]int
	publishes map[string]int // publish attempts by event id
	// applies counts handled deliveries: applied (effect committed),
	// refused (the inbox found the id: a redelivery absorbed), failed;
	// redelivered counts those whose broker said they were not the first.
	applied, refused, failed, redelivered int
	drainPublished, drainApplied          int
}

// tallyMessages sorts a history's operations.
func tallyMessages(ops []Op) *msgsTally {
	t := &msgsTally{sends: map[string]Op{}, outcomes: map[Outcome]int{}, publishes: map[string]int{}}
	for _, op := range ops {
		switch op.Kind {
		case "send":
			t.sends[op.Key] = op
			t.outcomes[op.Outcome]++
		case "publish":
			t.publishes[op.Key]++
			if op.Process == 0 {
				t.drainPublished++
			}
		case "apply":
			switch {
			case op.Outcome == OK && op.Ret == 1:
				t.applied++
				if op.Process == 0 {
					t.drainApplied++
				}
			case op.Outcome == OK:
				t.refused++
			default:
				t.failed++
			}
			if op.Arg > 1 {
				t.redelivered++
			}
		}
	}
	return t
}

// checkMessages judges a history against storage after the drain (see
// messagesWorkload for the anomalies).
func checkMessages(ops []Op, st msgsState) *Report {
	r := &Report{}
	t := tallyMessages(ops)
	effects := map[string][]int{} // event → processes that applied it
	for _, f := range st.effects {
		effects[f.Event] = append(effects[f.Event], f.Process)
	}
	ids := map[string]bool{}
	for _, m := range []map[string]bool{st.outbox, st.orders} {
		for id := range m {
			ids[id] = true
		}
	}
	for id := range effects {
		ids[id] = true
	}
	for id := range t.sends {
		ids[id] = true
	}
	var duplicated, ambiguousCommitted, republished int
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		send, sent := t.sends[id]
		published, committed := st.outbox[id]
		procs := effects[id]
		if !sent {
			r.add("unknown-event", "event %q, which no client sent: outbox row %v, business row %v, effects by processes %v",
				id, committed, st.orders[id], procs)
			continue
		}
		if committed != st.orders[id] {
			r.add("torn", "event %q: outbox row %v but business row %v (send %s)", id, committed, st.orders[id], msgsDescribe(send))
		}
		switch {
		case send.Outcome == Fail && (committed || len(procs) > 0):
			r.add("phantom", "event %q: the send failed (%s) but its event committed (%v) or took effect (processes %v)",
				id, send.Err, committed, procs)
		case !committed && len(procs) > 0:
			r.add("phantom", "event %q: applied by processes %v, but its event never committed (send %s)", id, procs, msgsDescribe(send))
		}
		if len(procs) > 1 {
			duplicated++
			r.add("duplicate-effect", "event %q: %d effects, by processes %v (0 is the drain); published %d times; send %s",
				id, len(procs), procs, t.publishes[id], msgsDescribe(send))
		}
		if len(procs) == 0 && (committed || send.Outcome == OK) {
			switch {
			case !committed:
				r.add("lost", "event %q: the send was acknowledged, but the outbox has no row for it", id)
			case !published:
				r.add("stranded", "event %q: still unpublished in the outbox after the drain (send %s)", id, msgsDescribe(send))
			default:
				r.add("lost", "event %q: published %d times, never applied (send %s)", id, t.publishes[id], msgsDescribe(send))
			}
		}
		if committed && send.Outcome.Ambiguous() {
			ambiguousCommitted++
		}
		if t.publishes[id] > 1 {
			republished++
		}
	}
	r.note("%d sends: %d ok, %d unknown, %d pending, %d failed; %d committed (%d of them ambiguous)", len(t.sends),
		t.outcomes[OK], t.outcomes[Unknown], t.outcomes[Pending], t.outcomes[Fail], len(st.outbox), ambiguousCommitted)
	r.note("%d publishes (%d by the drain); %d events published more than once", msgsSum(t.publishes), t.drainPublished, republished)
	r.note("%d effects of %d events (%d by the drain); %d events with more than one", len(st.effects), len(effects), t.drainApplied, duplicated)
	r.note("deliveries handled: %d applied, %d refused by the inbox as already applied, %d failed; %d flagged as redeliveries by the broker",
		t.applied, t.refused, t.failed, t.redelivered)
	return r.finish()
}

// msgsSum adds up m's values.
func msgsSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// msgsDescribe says how a send ended.
func msgsDescribe(op Op) string {
	s := fmt.Sprintf("process %d #%d %s", op.Process, op.Seq, op.Outcome)
	if op.Err != "" {
		s += " (" + strings.TrimSpace(op.Err) + ")"
	}
	return s
}
