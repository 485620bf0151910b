package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func closedCell(db, strategy string, rows, workers int, tput float64) CellResult {
	c := Cell{DB: db, Workload: Counter, Strategy: strategy, Dist: DistUniform, Rows: rows, Workers: workers, Mode: ModeClosed}
	return CellResult{Cell: c, ID: c.ID(), Status: StatusOK, Throughput: tput, Check: Check{Status: CheckPassed}}
}

func syntheticSummary() *Summary {
	s := &Summary{Format: FormatVersion, RunID: "r1", Servers: []Server{{DB: Postgres, Durable: true, Ceiling: 2000, CeilingSource: "disk fdatasync loop"}}}
	add := func(c CellResult) { s.Cells = append(s.Cells, c) }
	cas1 := closedCell(Postgres, "cas", 1, 8, 400)
	cas1.RetriesPerOp, cas1.GaveUp = 3, 12
	add(cas1)
	add(closedCell(Postgres, "for-update", 1, 8, 1000))
	add(closedCell(Postgres, "single-update", 1, 8, 1500))
	add(closedCell(Postgres, "cas", 16, 8, 2000))
	add(closedCell(Postgres, "for-update", 16, 8, 1900))
	add(closedCell(Postgres, "cas", 256, 8, 4000))
	add(closedCell(Postgres, "for-update", 256, 8, 3000))
	add(closedCell(Postgres, "cas", 1, 1, 500))
	add(closedCell(Postgres, "for-update", 1, 1, 480))
	lossy := closedCell(Postgres, "lossy", 1, 8, 9000)
	lossy.Check = Check{Status: CheckFailed, Detail: "row 1: v changed by 10, clients acknowledged 20"}
	add(lossy)
	return s
}

func TestVerdictNamesTheCrossover(t *testing.T) {
	s := syntheticSummary()
	v := verdicts(s)
	if len(v) != 1 {
		t.Fatalf("%d verdicts", len(v))
	}
	text := strings.Join(v[0].Lines, "\n")
	for _, want := range []string{
		"lossy (deliberately unsafe) FAILED",
		"Hottest: 1 row × 8 workers (8 writers per row): use for-update (1000 ops/s), cas 2.5× slower (3.0 retries/op)",
		"Fastest correct strategy with 8 workers: 1 hot row → for-update; 16–256 hot rows → cas.",
		"At ≥ 8 writers per row for-update is 2.5× faster than cas",
		"at ≤ 1 writers per row cas is as fast (within 10%) or faster",
		"50% of the durable ceiling",
		"single-update, the reference) does 1.5× the best",
		"cas gave up on 12 operations at 1 row × 8 workers (closed)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("verdict lacks %q:\n%s", want, text)
		}
	}
	// The lossy strategy is never ranked, however fast.
	for _, p := range v[0].Points {
		for _, r := range p.Ranking {
			if r.Strategy == "lossy" || r.Strategy == "single-update" {
				t.Errorf("%s ranked at %s", r.Strategy, p.Contention)
			}
		}
	}
	if got := s.Failed(); len(got) != 0 {
		t.Errorf("Failed() = %v: the lossy strategy's failure is expected", got)
	}
}

func TestCompareFlagsRegressions(t *testing.T) {
	base := syntheticSummary()
	cur := syntheticSummary()
	cur.RunID = "r2"
	cur.Cells[1].Throughput = 500                                                // for-update 1 row: halved
	cur.Cells[3].Check = Check{Status: CheckFailed}                              // cas 16 rows: now fails
	cur.Cells = append(cur.Cells, closedCell(Postgres, "for-update", 4, 8, 100)) // no baseline cell
	c := Compare(base, cur, 0)
	if c.Tolerance != DefaultTolerance || c.Regressions != 2 || c.Unmatched != 1 {
		t.Fatalf("comparison: %+v", c)
	}
	var buf bytes.Buffer
	c.WriteTable(&buf)
	out := buf.String()
	for _, want := range []string{"REGRESSION: throughput 50% of baseline", "REGRESSION: check now FAILED", "2 regressions"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestVerdictSeparatesReshapingStrategies: a combine cell that beats the
// single UPDATE is not "noise", and the ceiling and reference lines speak
// of the best interactive strategy.
func TestVerdictSeparatesReshapingStrategies(t *testing.T) {
	s := syntheticSummary()
	s.Cells = append(s.Cells, closedCell(Postgres, "combine", 1, 8, 30000))
	text := strings.Join(verdicts(s)[0].Lines, "\n")
	for _, want := range []string{
		"use combine (30000 ops/s), for-update 30.0× slower",
		"combine changes the shape of the work (many changes per commit, or a row spread over shards): 30.0× the best interactive strategy (for-update, 1000 ops/s)",
		"the best interactive strategy reaches 50% of the durable ceiling",
		"single-update, the reference) does 1.5× the best",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("verdict lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "noisy") {
		t.Errorf("verdict calls a batching strategy's lead noise:\n%s", text)
	}
}

func openCell(strategy string, rows, workers int, rate, tput, sloMs float64) CellResult {
	c := closedCell(Postgres, strategy, rows, workers, tput)
	c.Mode, c.Rate, c.RateSpec = ModeOpen, rate, f64(rate)
	c.ID = c.Cell.ID()
	c.SLOLatency = &sloMs
	return c
}

// TestVerdictSLO: the SLO verdict names the strategy that meets the
// target at the highest offered load, at the hottest point, even when a
// strategy with more closed-loop throughput misses it; it says when none
// meets it; without open-loop cells it judges the closed-loop cells.
func TestVerdictSLO(t *testing.T) {
	slo := &SLO{Percentile: 99, Latency: 50 * time.Millisecond}
	run := func(cells ...CellResult) Verdict {
		s := &Summary{Format: FormatVersion, Settings: &Settings{SLO: slo}}
		s.Cells = cells
		v := verdicts(s)
		if len(v) != 1 {
			t.Fatalf("%d verdicts", len(v))
		}
		return v[0]
	}
	line := func(v Verdict) string {
		for _, l := range v.Lines {
			if strings.HasPrefix(l, "SLO ") {
				return l
			}
		}
		t.Fatalf("no SLO line in:\n%s", strings.Join(v.Lines, "\n"))
		return ""
	}
	p99 := func(c CellResult, ms float64) CellResult { c.SLOLatency = &ms; return c }

	// cas is fastest closed-loop but starves its tail; for-update keeps
	// p99 within 50 ms up to 900/s; a colder point (16 rows) is ignored.
	v := run(
		p99(closedCell(Postgres, "cas", 1, 8, 4000), 900),
		p99(closedCell(Postgres, "for-update", 1, 8, 1000), 40),
		p99(closedCell(Postgres, "combine", 1, 8, 30000), 4),
		openCell("cas", 1, 8, 450, 450, 300),
		openCell("cas", 1, 8, 900, 890, 1500),
		openCell("for-update", 1, 8, 450, 450, 12),
		openCell("for-update", 1, 8, 900, 899, 45),
		openCell("for-update", 1, 8, 1200, 1000, 40), // did not keep up: not met
		openCell("cas", 16, 8, 5000, 5000, 5),
	)
	l := line(v)
	for _, want := range []string{
		"SLO p99=50ms at 1 row × 8 workers (open loop",
		"use for-update — for-update meets it up to 900 ops/s offered",
		"cas at none of the loads measured (300.0 ms at 450 ops/s)",
		"Not measured in open loop here: combine (--open-strategies).",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("SLO line lacks %q:\n%s", want, l)
		}
	}
	if v.SLOChoice != "for-update" || !strings.Contains(strings.Join(v.Lines, "\n"), "use combine (30000 ops/s)") {
		t.Errorf("choice %q; lines:\n%s", v.SLOChoice, strings.Join(v.Lines, "\n"))
	}

	// Nobody meets it.
	v = run(openCell("cas", 1, 8, 450, 450, 300), openCell("for-update", 1, 8, 450, 450, 80))
	if l := line(v); v.SLOChoice != "" || !strings.Contains(l, "no strategy meets it at any load measured; the lowest was for-update's (80.0 ms at 450 ops/s offered)") {
		t.Errorf("choice %q, line %s", v.SLOChoice, l)
	}

	// Closed loop only: the fastest within the target.
	v = run(p99(closedCell(Postgres, "cas", 1, 8, 4000), 900), p99(closedCell(Postgres, "for-update", 1, 8, 1000), 40))
	if l := line(v); v.SLOChoice != "for-update" || !strings.Contains(l, "use for-update (1000 ops/s, p99 40.0 ms); cas is faster (4000 ops/s) but misses it (900.0 ms)") {
		t.Errorf("choice %q, line %s", v.SLOChoice, l)
	}

	// No SLO: no SLO line.
	s := syntheticSummary()
	for _, l := range verdicts(s)[0].Lines {
		if strings.HasPrefix(l, "SLO ") {
			t.Errorf("SLO line without an SLO: %s", l)
		}
	}
}

// TestMarkdownColumns: every row of the cells table has the header's
// number of columns, with and without an SLO, for failed cells too.
func TestMarkdownColumns(t *testing.T) {
	for k, slo := range []*SLO{nil, {Percentile: 99.9, Latency: time.Second}, nil} {
		galera := k == 2
		s := syntheticSummary()
		if galera {
			s = galeraSummary(40)
		}
		s.Settings = &Settings{SLO: slo}
		bad := closedCell(Postgres, "nowait", 1, 8, 0)
		bad.Status, bad.Reason = StatusError, "connect: refused"
		s.Cells = append(s.Cells, bad, openCell("for-update", 1, 8, 450, 450, 12))
		var buf bytes.Buffer
		s.writeMarkdown(&buf, nil)
		text := buf.String()
		i := strings.Index(text, "| db | workload |")
		if i < 0 {
			t.Fatal("no cells table")
		}
		var cols int
		for n, row := range strings.Split(text[i:], "\n") {
			if !strings.HasPrefix(row, "|") {
				break
			}
			c := strings.Count(row, "|")
			if n == 0 {
				cols = c
			} else if c != cols {
				t.Errorf("SLO %v: row %d has %d bars, header %d:\n%s", slo, n, c, cols, row)
			}
		}
		if slo != nil && !strings.Contains(text, "| SLO p99.9 ms | > 1s |") {
			t.Errorf("no SLO columns:\n%s", text[i:i+300])
		}
		if galera != strings.Contains(text, "| retries/op | cert fail | commits by node |") {
			t.Errorf("galera %v: cert fail columns wrong:\n%s", galera, text[i:i+300])
		}
	}
}

// galeraSummary is a run on a 3-node Galera cluster: for-update met
// conflicts certification failures on one hot row, cas 50.
func galeraSummary(conflicts int64) *Summary {
	s := &Summary{Format: FormatVersion, RunID: "g1", Servers: []Server{{
		DB: MariaDB, Label: "MariaDB Galera (3 nodes)", ClusterSize: 3, AdminNode: 1,
		Nodes: []string{"u:xxxxx@tcp(n1)/", "u:xxxxx@tcp(n2)/", "u:xxxxx@tcp(n3)/"},
	}}}
	add := func(strategy string, rows int, tput, retries float64, certFailures, bfAborts, deadlocks int64) {
		c := closedCell(MariaDB, strategy, rows, 6, tput)
		c.RetriesPerOp, c.TotalCommitted = retries, int64(tput)
		c.Aborts = map[string]int64{"deadlock": deadlocks}
		c.Galera = &GaleraCell{CertFailures: certFailures, BFAborts: bfAborts, Conflicts: certFailures + bfAborts,
			NodeConns: []int64{2, 2, 2}, NodeCommits: []int64{100, 90, 80}}
		s.Cells = append(s.Cells, c)
	}
	add("for-update", 1, 287, 0.53, conflicts/3, conflicts-conflicts/3, conflicts/2)
	add("cas", 1, 315, 0.70, 30, 20, 5)
	add("single-update", 1, 200, 0.27, 60, 40, 73)
	add("for-update", 256, 900, 0, 0, 0, 0)
	return s
}

// TestVerdictGalera: on Galera the verdict says what multi-primary did to
// FOR UPDATE with the run's own numbers, or that it met no conflict; the
// 1213 lines name certification, not lock order.
func TestVerdictGalera(t *testing.T) {
	text := strings.Join(verdicts(galeraSummary(300))[0].Lines, "\n")
	for _, want := range []string{
		"On MariaDB Galera (3 nodes) FOR UPDATE does not wait across nodes: at 1 row × 6 workers, connections on 3 nodes, " +
			"for-update met 300 certification conflicts (100 failed certification at COMMIT, 200 aborted by a replicated write) " +
			"for 287 committed operations, 0.53 retries/op (287 ops/s)",
		"across nodes FOR UPDATE behaves like optimistic concurrency (cas there: 50 conflicts, 0.70 retries/op, 315 ops/s).",
		"single-update (200 ops/s) is no ceiling here: on Galera its statements fail certification",
		"Error 1213 (retried): for-update 150, cas 5, single-update 73 — on Galera it also reports a certification conflict",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("verdict lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "take the locks in key order (for-update") {
		t.Errorf("Galera verdict blames lock order:\n%s", text)
	}
	none := strings.Join(verdicts(galeraSummary(0))[0].Lines, "\n")
	if !strings.Contains(none, "for-update met no certification conflict at its hottest point (1 row × 6 workers, connections on 3 nodes") ||
		strings.Contains(none, "does not wait across nodes") {
		t.Errorf("no conflicts measured, verdict:\n%s", none)
	}
	var buf bytes.Buffer
	if err := galeraSummary(300).WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "cert fail") || !strings.Contains(out, "mariadb: MariaDB Galera (3 nodes), clients spread over `u:xxxxx@tcp(n1)/`") {
		t.Errorf("table:\n%s", out)
	}
}
