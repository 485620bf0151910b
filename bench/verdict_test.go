package bench

import (
	"bytes"
	"strings"
	"testing"
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
