package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// DefaultTolerance is the relative change Compare flags as a regression
// when no tolerance is given.
const DefaultTolerance = 0.15

// Comparison is a run compared with an earlier one, cell by cell (cells
// are matched by ID).
type Comparison struct {
	BaselineRunID string  `json:"baseline_run_id"`
	Tolerance     float64 `json:"tolerance"`
	Deltas        []Delta `json:"deltas"`
	// Regressions counts the deltas flagged Regression; Unmatched the
	// cells of this run with no counterpart in the baseline.
	Regressions int `json:"regressions"`
	Unmatched   int `json:"unmatched"`
}

// Delta compares one cell with its baseline.
type Delta struct {
	ID             string  `json:"id"`
	Throughput     float64 `json:"throughput"`
	BaseThroughput float64 `json:"base_throughput"`
	// Ratio is Throughput / BaseThroughput; P99Ratio the same for the p99
	// latency (lower is better).
	Ratio     float64 `json:"ratio"`
	P99       float64 `json:"p99_ms"`
	BaseP99   float64 `json:"base_p99_ms"`
	P99Ratio  float64 `json:"p99_ratio"`
	Check     string  `json:"check"`
	BaseCheck string  `json:"base_check"`
	// Regression is set when throughput fell by more than the tolerance,
	// the p99 latency rose by more than the tolerance (and by more than
	// 1 ms), or a check that passed now fails; Reason says which.
	Regression bool   `json:"regression"`
	Reason     string `json:"reason,omitempty"`
}

// Compare compares cur with base. tolerance is the relative change that
// counts as a regression (0 means DefaultTolerance). Cells that did not
// run (skipped, error) in either run are left out.
func Compare(base, cur *Summary, tolerance float64) *Comparison {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	c := &Comparison{BaselineRunID: base.RunID, Tolerance: tolerance}
	old := map[string]CellResult{}
	for _, b := range base.Cells {
		old[b.ID] = b
	}
	for _, x := range cur.Cells {
		if x.Status != StatusOK {
			continue
		}
		b, ok := old[x.ID]
		if !ok || b.Status != StatusOK {
			c.Unmatched++
			continue
		}
		d := Delta{
			ID: x.ID, Throughput: x.Throughput, BaseThroughput: b.Throughput,
			P99: x.Latency.P99, BaseP99: b.Latency.P99, Check: x.Check.Status, BaseCheck: b.Check.Status,
		}
		if b.Throughput > 0 {
			d.Ratio = x.Throughput / b.Throughput
		}
		if b.Latency.P99 > 0 {
			d.P99Ratio = x.Latency.P99 / b.Latency.P99
		}
		switch {
		case b.Check.Status == CheckPassed && x.Check.Status == CheckFailed:
			d.Regression, d.Reason = true, "check now FAILED"
		case b.Throughput > 0 && d.Ratio < 1-tolerance:
			d.Regression, d.Reason = true, fmt.Sprintf("throughput %.0f%% of baseline", 100*d.Ratio)
		case b.Latency.P99 > 0 && d.P99Ratio > 1+tolerance && x.Latency.P99-b.Latency.P99 > 1:
			d.Regression, d.Reason = true, fmt.Sprintf("p99 %.1f× baseline", d.P99Ratio)
		}
		if d.Regression {
			c.Regressions++
		}
		c.Deltas = append(c.Deltas, d)
	}
	return c
}

// WriteTable writes the comparison as a table, regressions flagged.
func (c *Comparison) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "Against baseline %s (tolerance %.0f%%): %d cells compared, %d regressions, %d without a baseline cell\n",
		c.BaselineRunID, 100*c.Tolerance, len(c.Deltas), c.Regressions, c.Unmatched)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cell\tops/s\tbase\tratio\tp99 ms\tbase\tratio\tcheck\t")
	for _, d := range c.Deltas {
		flag := ""
		if d.Regression {
			flag = "REGRESSION: " + d.Reason
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\n",
			d.ID, d.Throughput, d.BaseThroughput, d.Ratio, d.P99, d.BaseP99, d.P99Ratio, d.Check, flag)
	}
	_ = tw.Flush()
}
