package e2etest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/testkit"
)

// Fault kinds, as reported.
const (
	faultRelayKilled     = "relay child SIGKILLed after publish, before mark"
	faultRelayRandom     = "relay child SIGKILLed at a random point"
	faultRelayCancelled  = "in-process relay cancelled after publish, before mark"
	faultConsumerKilled  = "consumer child SIGKILLed after commit, before ack"
	faultConsumerRandom  = "consumer child SIGKILLed at a random point"
	faultAckDropped      = "publish acks dropped (replies held, connection cut)"
	faultBrokerRestarted = "broker SIGKILLed and restarted"
	faultBrokerFrozen    = "broker frozen 3 s (SIGSTOP)"
)

// schedule is one round of faults, in order.
var schedule = []string{
	faultRelayKilled, faultRelayCancelled, faultConsumerKilled, faultAckDropped, faultBrokerRestarted,
	faultRelayKilled, faultConsumerKilled, faultAckDropped, faultRelayCancelled, faultBrokerFrozen,
}

// stepTimeout bounds one fault step (a RabbitMQ restart takes 15-25 s on
// a loaded machine).
const stepTimeout = 3 * time.Minute

// run is one end-to-end run's state.
type run struct {
	t      *testing.T
	b      Broker
	kind   string
	dsn    string
	proc   *testkit.Proc
	proxy  *testkit.Proxy
	d      *db
	logDir string

	mu       sync.Mutex
	children []*child
	faults   map[string]int
}

// Run runs the end-to-end test of b on the database kind (Postgres or
// MariaDB) and logs its figures.
func Run(t *testing.T, b Broker, kind string) {
	events := envInt(EnvEvents, DefaultEvents)
	rounds := envInt(EnvRounds, 1)
	ctx := t.Context()
	r := &run{t: t, b: b, kind: kind, faults: map[string]int{}, logDir: t.TempDir()}
	switch kind {
	case Postgres:
		r.dsn = testkit.PostgresURL(t)
	case MariaDB:
		r.dsn = testkit.MySQLDSN(t)
	}
	if err := setup(ctx, kind, r.dsn); err != nil {
		t.Fatal(err)
	}
	d, err := openDB(ctx, kind, r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	r.d = d
	r.proc = b.Start(t)
	r.proxy = testkit.StartProxy(t, r.proc.Addr)
	if err := b.Setup(ctx, r.proc.Addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.killAll)
	start := time.Now()

	consumer := r.start("consumer", 0)
	relayChild := r.start("relay", 0)
	inproc := r.startInProcessRelay(ctx)

	// The producer writes events at full speed up to the share of the
	// faults done so far, then one every 200 ms (traffic for the armed
	// faults), and keeps going until every fault ran and events were
	// written.
	steps := len(schedule) * rounds
	var faultsDone atomic.Int64
	var produced atomic.Int64
	stopProducing := make(chan struct{})
	prodErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
				prodErr <- nil
				return
			default:
			}
			done := faultsDone.Load()
			if int64(i) >= int64(events)*(done+1)/int64(steps+1) {
				if done == int64(steps) && i >= events {
					prodErr <- nil
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err := d.produce(ctx, b.Topic(), fmt.Sprintf("ev-%07d", i)); err != nil {
				prodErr <- fmt.Errorf("produce event %d: %w", i, err)
				return
			}
			produced.Add(1)
		}
	}()

	step := 0
	for round := range rounds {
		for _, f := range schedule {
			// Spread the faults over the run: step k waits for its share
			// of the events.
			for produced.Load() < int64(events)*int64(step)/int64(steps+1) {
				time.Sleep(20 * time.Millisecond)
			}
			step++
			t.Logf("round %d: %s (%d events produced)", round+1, f, produced.Load())
			switch f {
			case faultRelayKilled:
				r.kill(relayChild)
				r.fault(faultRelayRandom)
				c := r.start("relay", 2)
				if r.await(c, "PUBLISHED") {
					r.kill(c)
					r.fault(f)
				}
				relayChild = r.start("relay", 0)
			case faultConsumerKilled:
				r.kill(consumer)
				r.fault(faultConsumerRandom)
				c := r.start("consumer", 3)
				if r.await(c, "COMMITTED") {
					r.kill(c)
					r.fault(f)
				}
				consumer = r.start("consumer", 0)
			case faultRelayCancelled:
				inproc.cancelArmed.Store(true)
				r.awaitSignal(inproc.cancelled, f)
			case faultAckDropped:
				inproc.dropArmed.Store(true)
				r.awaitSignal(inproc.dropped, f)
			case faultBrokerRestarted:
				r.proc.Kill(t)
				r.proc.Start(t)
				r.fault(f)
			case faultBrokerFrozen:
				r.proc.Freeze(t)
				time.Sleep(3 * time.Second)
				r.proc.Thaw(t)
				r.fault(f)
			}
			faultsDone.Add(1)
		}
	}
	if err := <-prodErr; err != nil {
		close(stopProducing)
		t.Fatal(err)
	}
	total := produced.Load()

	// Every event's effect, nothing pending.
	deadline := time.Now().Add(10 * time.Minute)
	var rows, distinct, pending int64
	var twice []string
	for {
		rows, distinct, twice, err = d.effects(ctx)
		if err == nil {
			pending, err = d.pend(ctx)
		}
		if err == nil && distinct == total && pending == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			missing, _ := d.missing(ctx)
			t.Fatalf("after %v: %d of %d events applied, %d pending (%v); missing e.g. %v\n%s",
				time.Since(start).Round(time.Second), distinct, total, pending, err, missing, r.logTails())
		}
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(start)
	inproc.stop()
	r.killAll()
	// A late redelivery can only add an absorbed duplicate: read once more.
	if rows, distinct, twice, err = d.effects(ctx); err != nil {
		t.Fatal(err)
	}
	if rows != total || distinct != total || len(twice) > 0 {
		t.Errorf("effects: %d rows for %d distinct events of %d produced; applied more than once: %v", rows, distinct, total, twice)
	}
	counts, err := d.counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	brokerDups := counts["broker_duplicates"] + inproc.dups()
	var fs []string
	for _, f := range []string{faultRelayKilled, faultRelayRandom, faultRelayCancelled, faultConsumerKilled, faultConsumerRandom,
		faultAckDropped, faultBrokerRestarted, faultBrokerFrozen} {
		fs = append(fs, fmt.Sprintf("%s ×%d", f, r.faults[f]))
	}
	t.Logf("E2E %s on %s: %d events (%d transactions), every effect applied exactly once, 0 unpublished, in %v\n"+
		"  faults: %s\n  broker-side duplicates dropped: %d; inbox-absorbed duplicates: %d",
		b.Name(), kind, total, total, elapsed.Round(time.Second), strings.Join(fs, "; "), brokerDups, counts["inbox_duplicates"])
	for _, f := range schedule {
		if r.faults[f] == 0 {
			t.Errorf("fault %q never happened", f)
		}
	}
}

func (r *run) fault(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[kind]++
}

// awaitSignal waits for an armed in-process fault to fire.
func (r *run) awaitSignal(fired <-chan error, kind string) {
	select {
	case err := <-fired:
		if err != nil {
			r.t.Errorf("%s: %v", kind, err)
			return
		}
		r.fault(kind)
	case <-time.After(2 * stepTimeout): // the hook's own waits are bounded by stepTimeout
		r.t.Errorf("%s: not fired within %v", kind, 2*stepTimeout)
	}
}

// ---------------------------------------------------------------- children

type child struct {
	role  string
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	log   string
}

// start starts a child (the test binary again, its TestMain sees the
// role) and waits until it is READY.
func (r *run) start(role string, stopAfter int) *child {
	r.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDB+"="+r.kind, envDSN+"="+r.dsn,
		envAddr+"="+r.proc.Addr, envStop+"="+strconv.Itoa(stopAfter))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	rd, wr, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	logf, err := os.CreateTemp(r.logDir, role+"-*.log")
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = wr, logf
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	_ = wr.Close()
	_ = logf.Close()
	c := &child{role: role, cmd: cmd, lines: make(chan string, 16), done: make(chan struct{}), log: logf.Name()}
	go func() {
		sc := bufio.NewScanner(rd)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_ = rd.Close()
		close(c.lines)
	}()
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	r.mu.Lock()
	r.children = append(r.children, c)
	r.mu.Unlock()
	if !r.await(c, "READY") {
		r.t.Fatalf("%s child not ready\n%s", role, r.logTails())
	}
	return c
}

// await waits for a line starting with prefix from c.
func (r *run) await(c *child, prefix string) bool {
	timeout := time.After(stepTimeout)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				r.t.Errorf("%s child exited before %s\n%s", c.role, prefix, tail(c.log))
				return false
			}
			if strings.HasPrefix(l, prefix) {
				return true
			}
		case <-timeout:
			r.t.Errorf("%s child: no %s within %v", c.role, prefix, stepTimeout)
			return false
		}
	}
}

func (r *run) kill(c *child) {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (r *run) killAll() {
	r.mu.Lock()
	cs := r.children
	r.mu.Unlock()
	for _, c := range cs {
		r.kill(c)
	}
}

func (r *run) logTails() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, c := range r.children {
		if t := tail(c.log); t != "" {
			fmt.Fprintf(&b, "---- %s (%s)\n%s\n", c.role, filepath.Base(c.log), t)
		}
	}
	return b.String()
}

func tail(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// ---------------------------------------------------------------- in-process relay

// inProcess is the relay in the test process, connected through the
// proxy; its publisher has two armable faults.
type inProcess struct {
	cancelArmed, dropArmed atomic.Bool
	cancelled, dropped     chan error
	dups                   func() int64
	stop                   func()
}

func (r *run) startInProcessRelay(ctx context.Context) *inProcess {
	t := r.t
	pub, dups, stopPub, err := r.b.Publisher(ctx, r.proxy.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ip := &inProcess{cancelled: make(chan error, 1), dropped: make(chan error, 1), dups: func() int64 { return 0 }}
	if dups != nil {
		ip.dups = dups
	}
	var mu sync.Mutex
	var cancelRun context.CancelFunc
	hooked := outbox.PublisherFunc(func(pctx context.Context, msgs []outbox.Message) error {
		if ip.dropArmed.CompareAndSwap(true, false) {
			// Requests go through, answers are held: the broker stores
			// the batch (the consumer applies it), the acks never come
			// back; then the connection is cut. First a message no stream
			// or queue takes, so that the publisher is connected: a
			// connection opened under held answers never completes (the
			// AMQP publisher dials lazily, after a broker restart).
			_ = pub.Publish(pctx, []outbox.Message{{ID: outbox.NewID(), Topic: "e2eprobe"}})
			r.proxy.FreezeReplies()
			errc := make(chan error, 1)
			go func() { errc <- pub.Publish(pctx, msgs) }()
			seen := r.waitApplied(ctx, msgs)
			r.proxy.Cut()
			r.proxy.Thaw()
			err := <-errc
			switch {
			case seen != nil:
				ip.dropped <- seen
			case err == nil:
				ip.dropped <- errors.New("the publish succeeded although its acks were dropped")
			default:
				ip.dropped <- nil
			}
			if err == nil {
				err = errors.New("acks dropped")
			}
			return err
		}
		if err := pub.Publish(pctx, msgs); err != nil {
			return err
		}
		if ip.cancelArmed.CompareAndSwap(true, false) {
			mu.Lock()
			cancelRun() // the mark that follows fails: published, not marked
			mu.Unlock()
			ip.cancelled <- nil
		}
		return nil
	})
	relay, err := outbox.NewRelay(r.d.store, hooked, relayConfig)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	runCtx, stopAll := context.WithCancel(ctx)
	go func() {
		defer close(done)
		for runCtx.Err() == nil {
			rctx, cancel := context.WithCancel(runCtx)
			mu.Lock()
			cancelRun = cancel
			mu.Unlock()
			_ = relay.Run(rctx)
			cancel()
		}
	}()
	ip.stop = func() {
		stopAll()
		<-done
		stopPub()
	}
	t.Cleanup(func() {
		stopAll()
		<-done
	})
	return ip
}

// waitApplied waits until every message of the batch had its effect
// applied (so the broker stored it).
func (r *run) waitApplied(ctx context.Context, msgs []outbox.Message) error {
	events := make([]string, len(msgs))
	for i, m := range msgs {
		events[i] = m.Key
	}
	deadline := time.Now().Add(stepTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, err := r.d.applied(ctx, events)
		if err == nil && n == len(events) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the batch of %d was not applied within %v while its acks were held", len(msgs), stepTimeout)
}
