package chaos

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/concurkit/concurkit/testkit"
)

// TestCheckMessages feeds the checker hand-made histories and storage:
// one it must accept, then one anomaly each.
func TestCheckMessages(t *testing.T) {
	send := func(p int, id string, o Outcome) Op {
		return Op{Process: p, Seq: 1, Kind: "send", Key: id, Outcome: o}
	}
	ops := []Op{
		send(1, "e1", OK),
		send(1, "e2", OK),
		send(2, "e3", Unknown), // committed after all
		send(2, "e4", Pending), // never committed
		send(3, "e5", Fail),
		{Process: 1, Seq: 2, Kind: "publish", Key: "e1", Outcome: OK},
		{Process: 2, Seq: 2, Kind: "apply", Key: "e1", Arg: 1, Ret: 1, Outcome: OK},
		{Process: 3, Seq: 2, Kind: "apply", Key: "e1", Arg: 2, Outcome: OK}, // a redelivery the inbox refused
	}
	valid := func() msgsState {
		return msgsState{
			outbox:  map[string]bool{"e1": true, "e2": true, "e3": true},
			orders:  map[string]bool{"e1": true, "e2": true, "e3": true},
			effects: []msgsEffect{{"e1", 2}, {"e2", 1}, {"e3", 0}},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(st *msgsState)
		want []string
	}{
		{"valid", func(*msgsState) {}, nil},
		{"duplicate", func(st *msgsState) { st.effects = append(st.effects, msgsEffect{"e1", 3}) }, []string{"duplicate-effect"}},
		{"duplicate of an ambiguous send", func(st *msgsState) { st.effects = append(st.effects, msgsEffect{"e3", 4}) }, []string{"duplicate-effect"}},
		{"lost: published, never applied", func(st *msgsState) { st.effects = st.effects[1:] }, []string{"lost"}},
		{"lost: acknowledged, never committed", func(st *msgsState) {
			delete(st.outbox, "e2")
			delete(st.orders, "e2")
			st.effects = slices.DeleteFunc(st.effects, func(f msgsEffect) bool { return f.Event == "e2" })
		}, []string{"lost"}},
		{"stranded", func(st *msgsState) {
			st.outbox["e2"] = false
			st.effects = slices.DeleteFunc(st.effects, func(f msgsEffect) bool { return f.Event == "e2" })
		}, []string{"stranded"}},
		{"stranded ambiguous send", func(st *msgsState) {
			st.outbox["e3"] = false
			st.effects = slices.DeleteFunc(st.effects, func(f msgsEffect) bool { return f.Event == "e3" })
		}, []string{"stranded"}},
		{"phantom: a failed send committed", func(st *msgsState) {
			st.outbox["e5"], st.orders["e5"] = true, true
			st.effects = append(st.effects, msgsEffect{"e5", 1})
		}, []string{"phantom"}},
		{"phantom: an effect of an event never committed", func(st *msgsState) { st.effects = append(st.effects, msgsEffect{"e4", 1}) }, []string{"phantom"}},
		{"unknown event", func(st *msgsState) { st.effects = append(st.effects, msgsEffect{"x9", 1}) }, []string{"unknown-event"}},
		{"torn", func(st *msgsState) { delete(st.orders, "e1") }, []string{"torn"}},
	} {
		st := valid()
		tc.edit(&st)
		r := checkMessages(ops, st)
		got := slices.Sorted(maps.Keys(r.Counts))
		if !slices.Equal(got, tc.want) || r.Valid != (len(tc.want) == 0) {
			t.Errorf("%s: anomalies %v (valid %v), want %v\n%+v", tc.name, got, r.Valid, tc.want, r.Anomalies)
		}
	}
	tally := tallyMessages(ops)
	if tally.applied != 1 || tally.refused != 1 || tally.redelivered != 1 {
		t.Errorf("tally: %d applied, %d refused, %d redelivered; want 1 each", tally.applied, tally.refused, tally.redelivered)
	}
}

// TestMessagesOptions: durations, and an error before any client starts
// for anything else.
func TestMessagesOptions(t *testing.T) {
	o, err := parseMsgsOptions(map[string]string{"pace": "5ms", "think": "0s", "isolation": "other workloads'"})
	if err != nil || o.pace != 5*time.Millisecond || o.think != 0 || o.drain != msgsDrain {
		t.Errorf("parse: %+v, %v", o, err)
	}
	for _, bad := range []map[string]string{{"pace": "fast"}, {"think": "-1ms"}, {"drain": "30"}} {
		if _, err := parseMsgsOptions(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, err := (messagesWorkload{}).systems("kafka"); err == nil {
		t.Error("systems(kafka): no error")
	}
}

// msgsEndpoints resolves the servers of a messages run on broker through
// testkit: unreachable fails the test under CI=true and skips it
// otherwise.
func msgsEndpoints(t *testing.T, broker string) *Endpoints {
	t.Helper()
	e := &Endpoints{Postgres: testkit.PostgresServerURL(t)}
	switch broker {
	case "nats":
		e.NATS = testkit.NATSURL(t)
	case "amqp":
		e.AMQP = testkit.AMQPURL(t)
	default:
		t.Fatalf("broker %q", broker)
	}
	return e
}

// TestMessages is the short form of the messaging runs, every nemesis on:
// with the inbox, every committed event must take effect exactly once and
// nothing may be stranded; the same seed without it (an outbox without
// the inbox) must show duplicate effects, and nothing else.
func TestMessages(t *testing.T) {
	// RabbitMQ's runs are make chaos's: CI's chaos runs share 3 minutes.
	for _, broker := range []string{"nats"} {
		t.Run(broker, func(t *testing.T) { // safe and unsafe side by side
			bothWays(t, func(t *testing.T, unsafe bool) {
				s, err := Run(t.Context(), &Config{
					Workload: "messages", Backend: broker, Unsafe: unsafe, Endpoints: msgsEndpoints(t, broker),
					Duration: 10 * time.Second, TTL: 300 * time.Millisecond, Seed: 20261207, Out: t.TempDir(),
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Log(s)
				if s.Ops["send/ok"] == 0 || s.Ops["apply/ok"] == 0 || s.Faults[NemesisKill]+s.Faults[NemesisPause] == 0 {
					t.Fatalf("no send, no apply or no client fault: the run proves nothing\n%s", s)
				}
				checkVerdict(t, s, unsafe, "the inbox", "duplicate-effect", true)
			})
		})
	}
}
