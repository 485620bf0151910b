package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Output file names inside the output directory.
const (
	FileSummary  = "summary.json"
	FileCSV      = "results.csv"
	FileMarkdown = "results.md"
	DirHlog      = "hlog"
	DirPlots     = "plots"
)

// DefaultOutDir returns the default output directory of a run started at
// t: bench-results/<timestamp>.
func DefaultOutDir(t time.Time) string {
	return filepath.Join("bench-results", t.UTC().Format("20060102T150405Z"))
}

// WriteFiles writes the run's results into dir (created if needed):
// summary.json, results.csv, results.md, one HdrHistogram interval log per
// cell under hlog/ and the PNG plots under plots/. It returns the paths
// written, relative to dir.
func (s *Summary) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(filepath.Join(dir, DirHlog), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, DirPlots), 0o755); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, data []byte) error {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
		files = append(files, name)
		return nil
	}
	for i := range s.Cells {
		c := &s.Cells[i]
		if len(c.hlog) == 0 {
			continue
		}
		c.Hlog = filepath.ToSlash(filepath.Join(DirHlog, fileName(c.ID)+".hlog"))
		if err := write(c.Hlog, c.hlog); err != nil {
			return files, err
		}
	}
	plots, err := s.writePlots(filepath.Join(dir, DirPlots))
	for _, p := range plots {
		files = append(files, filepath.ToSlash(filepath.Join(DirPlots, p)))
	}
	if err != nil {
		return files, err
	}
	var csvBuf bytes.Buffer
	if err := s.WriteCSV(&csvBuf); err != nil {
		return files, err
	}
	if err := write(FileCSV, csvBuf.Bytes()); err != nil {
		return files, err
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return files, err
	}
	if err := write(FileSummary, append(js, '\n')); err != nil {
		return files, err
	}
	var md bytes.Buffer
	s.writeMarkdown(&md, plots)
	if err := write(FileMarkdown, md.Bytes()); err != nil {
		return files, err
	}
	return files, nil
}

// fileName turns a cell ID into a file name.
func fileName(id string) string {
	r := strings.NewReplacer("/", "_", ":", "-", "=", "", ",", "_", " ", "")
	return r.Replace(id)
}

// csvHeader is the column list of results.csv. Columns are only ever
// added at the end (see FormatVersion).
var csvHeader = []string{
	"run_id", "id", "db", "workload", "read_mode", "strategy", "kind", "dist", "rows", "theta", "workers",
	"mode", "rate_spec", "offered_rate", "arrival", "status", "reason", "seconds",
	"ops", "throughput", "committed", "rejected", "reads",
	"retries", "retries_per_op", "aborts_per_op",
	"aborts_conflict", "aborts_deadlock", "aborts_serialization", "aborts_lock_not_available", "aborts_lock_timeout",
	"aborts_stale_token", "aborts_not_acquired", "aborts_lease_lost", "aborts_other",
	"gave_up", "failed", "unknown", "missed", "lock_release_errors",
	"lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "lat_p999_ms", "lat_max_ms", "lat_mean_ms",
	"svc_p50_ms", "svc_p95_ms", "svc_p99_ms", "svc_p999_ms", "svc_max_ms",
	"total_committed", "syncs", "syncs_per_commit", "ceiling", "ceiling_fraction",
	"check", "check_detail", "hlog", "error_sample",
	"attempts_p99", "attempts_max", "slo_latency_ms", "above_slo",
	"galera_conflicts", "galera_cert_failures", "galera_bf_aborts", "galera_node_conns", "galera_node_commits",
}

func f64(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
func f3(v float64) string  { return strconv.FormatFloat(v, 'f', 3, 64) }
func optF(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'f', 4, 64)
}

// WriteCSV writes one row per cell (results.csv).
func (s *Summary) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, c := range s.Cells {
		ceiling := ""
		if srv := s.server(c.DB); srv != nil && srv.Ceiling > 0 {
			ceiling = f3(srv.Ceiling)
		}
		row := []string{
			s.RunID, c.ID, c.DB, c.Workload, c.ReadMode, c.Strategy, kindOf(c.Strategy), c.Dist,
			strconv.Itoa(c.Rows), f64(c.Theta), strconv.Itoa(c.Workers),
			c.Mode, c.RateSpec, f3(c.Rate), c.Arrival, c.Status, c.Reason, f3(c.Seconds),
			itoa(c.Ops), f3(c.Throughput), itoa(c.Committed), itoa(c.Rejected), itoa(c.Reads),
			itoa(c.Retries), f3(c.RetriesPerOp), f3(c.AbortsPerOp),
		}
		for _, n := range classNames {
			row = append(row, itoa(c.Aborts[n]))
		}
		row = append(row,
			itoa(c.GaveUp), itoa(c.Failed), itoa(c.Unknown), itoa(c.Missed), itoa(c.ReleaseErrors),
			f3(c.Latency.P50), f3(c.Latency.P95), f3(c.Latency.P99), f3(c.Latency.P999), f3(c.Latency.Max), f3(c.Latency.Mean),
			f3(c.Service.P50), f3(c.Service.P95), f3(c.Service.P99), f3(c.Service.P999), f3(c.Service.Max),
			itoa(c.TotalCommitted), itoa(c.Syncs), optF(c.SyncsPerCommit), ceiling, optF(c.CeilingFraction),
			c.Check.Status, c.Check.Detail, c.Hlog, c.ErrorSample,
			itoa(c.AttemptsP99), itoa(c.AttemptsMax), optF(c.SLOLatency), optF(c.AboveSLO),
		)
		if g := c.Galera; g != nil {
			row = append(row, itoa(g.Conflicts), itoa(g.CertFailures), itoa(g.BFAborts), joinInts(g.NodeConns, ";"), joinInts(g.NodeCommits, ";"))
		} else {
			row = append(row, "", "", "", "", "")
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable writes the human-readable table of the cells (what the CLI
// prints on stdout), then the verdicts.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// On Galera, a column beside the retries: the cell's certification
	// conflicts (see GaleraCell).
	certHead, certEmpty := "", ""
	if s.galera() {
		certHead, certEmpty = "cert fail\t", "\t"
	}
	fmt.Fprintln(tw, "db\tworkload\tstrategy\tkeys\tw\tload\tops/s\tretry/op\t"+certHead+"gave up\tp50 ms\tp99 ms\tp99.9 ms\tsyncs/op\tceil%\tcheck\t")
	for _, c := range s.Cells {
		load := "closed"
		if c.Mode == ModeOpen {
			load = fmt.Sprintf("%.0f/s", c.Rate)
			if strings.HasPrefix(c.RateSpec, "x") {
				load = c.RateSpec + "=" + load
			}
		}
		if c.Status != StatusOK {
			reason := c.Reason
			if len(reason) > 60 {
				reason = reason[:57] + "..."
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\t\t\t\t\t\t%s\t\n", c.DB, workloadLabel(c.Cell), c.Strategy, c.Contention(), c.Workers, load, c.Status, certEmpty, reason)
			continue
		}
		ceil := ""
		if c.CeilingFraction != nil {
			ceil = fmt.Sprintf("%.0f%%", 100**c.CeilingFraction)
		}
		spc := ""
		if c.SyncsPerCommit != nil {
			spc = fmt.Sprintf("%.2f", *c.SyncsPerCommit)
		}
		cert := certEmpty
		if certHead != "" && c.Galera != nil {
			cert = itoa(c.Galera.Conflicts) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%.0f\t%.2f\t%s%d\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t\n",
			c.DB, workloadLabel(c.Cell), c.Strategy, c.Contention(), c.Workers, load, c.Throughput, c.RetriesPerOp,
			cert, c.GaveUp, c.Latency.P50, c.Latency.P99, c.Latency.P999, spc, ceil, c.Check.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, srv := range s.Servers {
		if srv.Label != "" || len(srv.Nodes) > 0 {
			fmt.Fprintf(w, "\n%s: %s\n", srv.DB, serverLabel(srv))
		}
	}
	for _, v := range s.Verdicts {
		fmt.Fprintf(w, "\nVerdict %s / %s:\n", v.DB, v.Workload)
		for _, l := range v.Lines {
			fmt.Fprintf(w, "  - %s\n", l)
		}
	}
	if s.Baseline != nil {
		fmt.Fprintln(w)
		s.Baseline.WriteTable(w)
	}
	return nil
}

// writeMarkdown writes results.md.
func (s *Summary) writeMarkdown(w io.Writer, plots []string) {
	fmt.Fprintf(w, "# concurkit bench %s\n\n", s.RunID)
	fmt.Fprintf(w, "Started %s, finished %s (%s). `concurkit bench %s`\n\n",
		s.Started.Format(time.RFC3339), s.Finished.Format(time.RFC3339), s.Finished.Sub(s.Started).Round(time.Second), strings.Join(s.Args, " "))
	h := s.Host
	fmt.Fprintf(w, "Clients: %s, %s/%s, %s, %d CPUs, GOMAXPROCS %d. Grid %s: %v per cell after %v warmup.\n\n",
		h.Hostname, h.OS, h.Arch, h.GoVersion, h.NumCPU, h.GOMAXPROCS, s.Settings.Grid, s.Settings.Duration, s.Settings.Warmup)
	fmt.Fprintln(w, "## Servers")
	fmt.Fprintln(w)
	for _, srv := range s.Servers {
		if srv.Label != "" || len(srv.Nodes) > 0 {
			fmt.Fprintf(w, "- **%s** %s — %s\n", srv.DB, serverLabel(srv), srv.Version)
		} else {
			fmt.Fprintf(w, "- **%s** `%s` — %s\n", srv.DB, srv.Endpoint, srv.Version)
		}
		keys := make([]string, 0, len(srv.Settings))
		for k := range srv.Settings {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+srv.Settings[k])
		}
		fmt.Fprintf(w, "  - settings: %s\n", strings.Join(kv, ", "))
		durable := "durable (a commit waits for its log flush)"
		if !srv.Durable {
			durable = "NOT durable (commits do not wait for the disk): hot-row numbers are far above a production server's"
		}
		fmt.Fprintf(w, "  - %s; sync counter: %s\n", durable, orNone(srv.SyncCounter))
		if srv.Disk != nil {
			fmt.Fprintf(w, "  - disk: %s in %s: %.0f/s (p50 %.2f ms)\n", srv.Disk.Method, filepath.Dir(srv.Disk.Path), srv.Disk.PerSec, srv.Disk.P50)
		}
		if srv.CommitLoop != nil {
			fmt.Fprintf(w, "  - commit loop: %s: %.0f/s (p50 %.2f ms)\n", srv.CommitLoop.Method, srv.CommitLoop.PerSec, srv.CommitLoop.P50)
		}
		if srv.Ceiling > 0 {
			fmt.Fprintf(w, "  - durable hot-row ceiling: %.0f commits/s (%s); the ceil%% column divides hot-row throughput by it\n", srv.Ceiling, srv.CeilingSource)
		}
	}
	fmt.Fprintln(w)
	if len(s.Verdicts) > 0 {
		fmt.Fprintln(w, "## Verdicts")
		fmt.Fprintln(w)
		for _, v := range s.Verdicts {
			fmt.Fprintf(w, "### %s / %s\n\n", v.DB, v.Workload)
			for _, l := range v.Lines {
				fmt.Fprintf(w, "- %s\n", l)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "## Cells")
	fmt.Fprintln(w)
	// With an SLO, two columns: the latency at its percentile and the
	// share of operations above its target.
	sloHead, sloRule, sloEmpty := "", "", ""
	if o := s.slo(); o != nil {
		sloHead = fmt.Sprintf(" SLO p%s ms | > %s |", strconv.FormatFloat(o.Percentile, 'g', -1, 64), o.Latency)
		sloRule, sloEmpty = "--:|--:|", " | |"
	}
	// On Galera, two columns beside the retries: the cell's certification
	// conflicts and its commits on each node.
	certHead, certRule, certEmpty := "", "", ""
	if s.galera() {
		certHead, certRule, certEmpty = " cert fail | commits by node |", "--:|--:|", " | |"
	}
	fmt.Fprintln(w, "| db | workload | strategy | keys | workers | load | ops/s | retries/op |"+certHead+" aborts/op | attempts p99/max | gave up | p50 ms | p95 ms | p99 ms | p99.9 ms | max ms |"+sloHead+" syncs/op | ceiling | check |")
	fmt.Fprintln(w, "|---|---|---|---|--:|---|--:|--:|"+certRule+"--:|--:|--:|--:|--:|--:|--:|--:|"+sloRule+"--:|--:|---|")
	for _, c := range s.Cells {
		load := "closed"
		if c.Mode == ModeOpen {
			load = fmt.Sprintf("open %s (%.0f/s)", c.RateSpec, c.Rate)
		}
		if c.Status != StatusOK {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s | %s: %s |%s | | | | | | | | |%s | | |\n",
				c.DB, workloadLabel(c.Cell), c.Strategy, c.Contention(), c.Workers, load, c.Status, mdEscape(c.Reason), certEmpty, sloEmpty)
			continue
		}
		ceil, spc := "", ""
		if c.CeilingFraction != nil {
			ceil = fmt.Sprintf("%.0f%%", 100**c.CeilingFraction)
		}
		if c.SyncsPerCommit != nil {
			spc = fmt.Sprintf("%.2f", *c.SyncsPerCommit)
		}
		check := c.Check.Status
		if c.Check.Status == CheckFailed {
			check = "**FAILED**: " + mdEscape(c.Check.Detail)
		}
		slo := ""
		if sloHead != "" {
			slo = " | |"
			if c.SLOLatency != nil && c.AboveSLO != nil {
				slo = fmt.Sprintf(" %.2f | %.1f%% |", *c.SLOLatency, 100**c.AboveSLO)
			}
		}
		cert := ""
		if certHead != "" {
			cert = certEmpty
			if g := c.Galera; g != nil {
				cert = fmt.Sprintf(" %d | %s |", g.Conflicts, joinInts(g.NodeCommits, "/"))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s | %.0f | %.2f |%s %.2f | %d/%d | %d | %.2f | %.2f | %.2f | %.2f | %.2f |%s %s | %s | %s |\n",
			c.DB, workloadLabel(c.Cell), c.Strategy, c.Contention(), c.Workers, load, c.Throughput, c.RetriesPerOp, cert, c.AbortsPerOp,
			c.AttemptsP99, c.AttemptsMax, c.GaveUp, c.Latency.P50, c.Latency.P95, c.Latency.P99, c.Latency.P999, c.Latency.Max, slo, spc, ceil, check)
	}
	fmt.Fprintln(w)
	if s.Baseline != nil {
		fmt.Fprintln(w, "## Against the baseline")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "```")
		s.Baseline.WriteTable(w)
		fmt.Fprintln(w, "```")
		fmt.Fprintln(w)
	}
	if len(plots) > 0 {
		fmt.Fprintln(w, "## Plots")
		fmt.Fprintln(w)
		for _, p := range plots {
			fmt.Fprintf(w, "![%s](%s/%s)\n\n", p, DirPlots, p)
		}
	}
	if len(s.Notes) > 0 {
		fmt.Fprintln(w, "## Notes")
		fmt.Fprintln(w)
		for _, n := range s.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "## Strategies")
	fmt.Fprintln(w)
	for _, st := range s.Strategies {
		hidden := ""
		if st.Hidden {
			hidden = ", hidden from the default set"
		}
		fmt.Fprintf(w, "- **%s** (%s%s; %s): %s", st.Name, st.Kind, hidden, strings.Join(st.DBs, ", "), st.Description)
		if len(st.Calls) > 0 {
			fmt.Fprintf(w, ". Measures: %s", strings.Join(st.Calls, ", "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Latency is measured from the intended start (open loop: the scheduled arrival, so queueing counts — no coordinated omission) to the end; service time from the actual start. Per-op ratios divide by the successful operations started in the window. Syncs per op divide the server-wide sync counter's increase by the cell's successful operations. HdrHistogram interval logs (values in ns) are under hlog/.")
}

// galera reports whether a cell of the run has Galera counters.
func (s *Summary) galera() bool {
	return slices.ContainsFunc(s.Cells, func(c CellResult) bool { return c.Galera != nil })
}

// serverLabel names a cluster and its nodes: "MariaDB Galera (3 nodes),
// clients spread over `a`, `b`, `c` (setup on node 1)".
func serverLabel(srv Server) string {
	var parts []string
	if srv.Label != "" {
		parts = append(parts, srv.Label)
	}
	if len(srv.Nodes) > 0 {
		quoted := make([]string, len(srv.Nodes))
		for i, n := range srv.Nodes {
			quoted[i] = "`" + n + "`"
		}
		parts = append(parts, fmt.Sprintf("clients spread over %s (setup and check on node %d)", strings.Join(quoted, ", "), srv.AdminNode))
	} else {
		parts = append(parts, "`"+srv.Endpoint+"`")
	}
	return strings.Join(parts, ", ")
}

// joinInts joins vs with sep ("3;3;2").
func joinInts(vs []int64, sep string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = itoa(v)
	}
	return strings.Join(out, sep)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// LoadSummary reads a summary.json written by WriteFiles.
func LoadSummary(path string) (*Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if !strings.HasPrefix(s.Format, "concurkit-bench/") {
		return nil, fmt.Errorf("bench: %s is not a concurkit bench summary (format %q)", path, s.Format)
	}
	return &s, nil
}
