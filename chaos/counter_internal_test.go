package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckCounter feeds the checker logs it must reject, one anomaly each,
// and one it must accept.
func TestCheckCounter(t *testing.T) {
	inc := func(p int, seq int64, tok, v int64, o Outcome) Op {
		return Op{Process: p, Seq: seq, Kind: "incr", Token: tok, Arg: v, Outcome: o}
	}
	ok := []Op{inc(1, 1, 1, 1, OK), inc(2, 1, 2, 2, OK), inc(1, 2, 3, 3, Unknown), inc(2, 2, 4, 3, Fail)}
	okLog := []logRow{{"c0", 1, 1, 1, 1}, {"c0", 2, 1, 2, 2}, {"c0", 1, 2, 3, 3}}
	for _, tc := range []struct {
		name  string
		ops   []Op
		log   []logRow
		final int64
		want  []string
	}{
		{"valid, ambiguous committed", ok, okLog, 3, nil},
		{"valid, ambiguous lost", ok, okLog[:2], 2, nil},
		{"lost update", ok, []logRow{{"c0", 1, 1, 1, 1}, {"c0", 2, 1, 2, 1}}, 1, []string{"lost-update"}},
		{"lost ack", ok, []logRow{{"c0", 1, 1, 1, 1}}, 1, []string{"lost-ack"}},
		{"stale write", ok, []logRow{{"c0", 1, 1, 2, 1}, {"c0", 2, 1, 1, 2}}, 2, []string{"stale-write"}},
		{"phantom", ok, []logRow{{"c0", 1, 1, 1, 1}, {"c0", 2, 1, 2, 2}, {"c0", 2, 2, 4, 3}}, 3, []string{"phantom"}},
		{"final", ok, okLog[:2], 5, []string{"final"}},
	} {
		r, _, _ := checkCounter(tc.ops, tc.log, tc.final)
		var got []string
		for k := range r.Counts {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) || r.Valid != (len(tc.want) == 0) {
			t.Errorf("%s: anomalies %v (valid %v), want %v\n%+v", tc.name, got, r.Valid, tc.want, r.Anomalies)
		}
	}
}

// TestPlan: the fault plan follows from the seed alone, fills the run and
// draws only the kinds asked for.
func TestPlan(t *testing.T) {
	a := plan(7, systemStream, 10*time.Minute, time.Second, time.Second, Nemeses)
	b := plan(7, systemStream, 10*time.Minute, time.Second, time.Second, Nemeses)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different plans")
	}
	if c := plan(8, systemStream, 10*time.Minute, time.Second, time.Second, Nemeses); slices.Equal(a, c) {
		t.Fatal("different seeds, same plan")
	}
	var total time.Duration
	kinds := map[string]int{}
	for _, f := range a {
		total += f.Gap + f.For
		kinds[f.Kind]++
		if f.Kind == NemesisPause && (f.For < time.Second || f.For > 3*time.Second) {
			t.Errorf("pause of %s, want 1-3 TTL", f.For)
		}
	}
	if total < 10*time.Minute || len(kinds) != len(Nemeses) {
		t.Errorf("plan covers %s with kinds %v", total, kinds)
	}
	if c := plan(7, clientStream, 10*time.Minute, time.Second, time.Second, Nemeses); slices.Equal(a, c) {
		t.Fatal("two streams, same plan")
	}
	if p := plan(7, clientStream, time.Minute, time.Second, time.Second, []string{NemesisKill}); len(p) == 0 || p[0].Kind != NemesisKill {
		t.Errorf("kill-only plan: %+v", p)
	}
	if p := plan(7, clientStream, time.Minute, time.Second, time.Second, nil); p != nil {
		t.Errorf("no nemesis, plan %+v", p)
	}
}

// TestCheckCounters: counters are judged one by one; an anomaly names its
// counter, and one counter's log never excuses another's.
func TestCheckCounters(t *testing.T) {
	ops := []Op{
		{Process: 1, Seq: 1, Kind: "incr", Key: "c0", Token: 1, Arg: 1, Outcome: OK},
		{Process: 2, Seq: 1, Kind: "incr", Key: "c1", Token: 2, Arg: 1, Outcome: OK},
	}
	log := []logRow{{"c0", 1, 1, 1, 1}, {"c1", 2, 1, 2, 1}}
	if r := checkCounters(ops, log, map[string]int64{"c0": 1, "c1": 1}); !r.Valid {
		t.Fatalf("valid history: %+v", r.Anomalies)
	}
	// c1's increment logged under c0: c0 has a lost update, c1 a lost ack.
	log[1].Key = "c0"
	r := checkCounters(ops, log, map[string]int64{"c0": 1, "c1": 0})
	if r.Counts["lost-update"] != 1 || r.Counts["lost-ack"] != 1 || !strings.HasPrefix(r.Anomalies[0].Detail, "c0: ") {
		t.Fatalf("anomalies %v: %+v", r.Counts, r.Anomalies)
	}
}

// TestHandovers: a change of token in a key's log is a handover, timed
// from the last acknowledged write of the old token to the first of the
// new; an unanswered write has no time and is skipped on either side.
func TestHandovers(t *testing.T) {
	ops := []Op{
		{Process: 1, Seq: 1, Kind: "incr", Outcome: OK, Return: 100},
		{Process: 1, Seq: 2, Kind: "incr", Outcome: OK, Return: 200},
		{Process: 2, Seq: 1, Kind: "incr", Outcome: Unknown}, // committed, unanswered
		{Process: 2, Seq: 2, Kind: "incr", Outcome: OK, Return: 1200},
		{Process: 3, Seq: 1, Kind: "incr", Outcome: OK, Return: 5200},
	}
	log := []logRow{
		{Key: "c0", Process: 1, Seq: 1, Token: 5},
		{Key: "c0", Process: 1, Seq: 2, Token: 5},
		{Key: "c0", Process: 2, Seq: 1, Token: 7},
		{Key: "c0", Process: 2, Seq: 2, Token: 7},
		{Key: "c0", Process: 3, Seq: 1, Token: 9},
	}
	gaps, changes := handovers(ops, log)
	if changes != 2 || !slices.Equal(gaps, []int64{1000, 4000}) {
		t.Fatalf("handovers = %v, %d; want [1000 4000], 2", gaps, changes)
	}
	if got := quantiles(nil); got != "none timed" {
		t.Errorf("quantiles(nil) = %q", got)
	}
	if got := quantiles([]int64{4e6, 1e6}); got != "p50 4ms, p99 4ms, max 4ms (2 timed)" {
		t.Errorf("quantiles = %q", got)
	}
}
