package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/concurkit/concurkit/deadlock"
)

func simulateCommand() *command {
	return &command{
		name:    "simulate",
		summary: "simulate two-phase locking and its deadlock policies on a seeded workload",
		args:    "[flags]",
		about: `Runs the two-phase-locking simulator (package deadlock) on a seeded workload
and prints committed/aborted counts, deadlocks, waits and throughput per policy.
Every run keeps its committed history (a record per committed step) and checks
that it is conflict-serializable.

Files are written only into --out, which is empty (no files) by default: the
wait-for graph of each policy's first deadlock (waitfor-POLICY.dot, and .svg
and .png when Graphviz's dot is installed), with --trace the schedule
(trace-POLICY.txt, one line per event: large when lock timeouts thrash), and
with --sweep the comparison (sweep.md, sweep.png, sweep-aborts.png). --sweep
runs every policy over contention (hot resources 1 to 10,000).

Under no-wait and timeout a run ends only because restart delays grow and are
random (see the deadlock package's "Progress"), so every run is bounded:
--max-events (scheduler events, about 15 s of CPU per 100 million) and
--max-time (logical time) stop it, print what it did so far and exit 1.`,
		example: `concurkit simulate --compare --hot 10
concurkit simulate --policy wound-wait --trace --out /tmp/sim
concurkit simulate --sweep --out /tmp/sweep`,
		run: runSimulate,
	}
}

type simulateFlags struct {
	policy, victim  string
	compare, sweep  bool
	trace           bool
	out             string
	wl              deadlock.Workload
	think           time.Duration
	concurrency     int
	opTime, timeout time.Duration
	interval        time.Duration
	restart         time.Duration
	maxRestart      time.Duration
	maxEvents       int
	maxTime         time.Duration
}

func runSimulate(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) error {
	var f simulateFlags
	fs := c.flagSet()
	fs.StringVar(&f.policy, "policy", "detect", "policy: detect, detect-periodic, wait-die, wound-wait, no-wait, timeout")
	fs.StringVar(&f.victim, "victim", "youngest", "deadlock victim: youngest, least-work, fewest-locks")
	fs.BoolVar(&f.compare, "compare", false, "run every policy on the same workload")
	fs.BoolVar(&f.sweep, "sweep", false, "compare every policy over contention (hot resources 1 to 10,000); with --out, writes sweep.md and PNG plots")
	fs.BoolVar(&f.trace, "trace", false, "write the schedule trace to trace-POLICY.txt in --out (required)")
	fs.StringVar(&f.out, "out", "", "directory for the wait-for graphs, traces and plots, created if missing (default: write no files)")
	fs.Uint64Var(&f.wl.Seed, "seed", 1, "workload seed (same seed, same run)")
	fs.IntVar(&f.wl.Transactions, "txns", 2000, "number of transactions")
	fs.IntVar(&f.wl.Resources, "resources", 1000, "number of resources (rows)")
	fs.IntVar(&f.wl.Length, "length", 8, "reads and writes per transaction")
	fs.Float64Var(&f.wl.ReadRatio, "read-ratio", 0.5, "probability that a step is a read (S lock), in [0, 1]")
	fs.Float64Var(&f.wl.Skew, "skew", 0, "Zipf exponent of resource popularity (0 = uniform)")
	fs.IntVar(&f.wl.HotResources, "hot", 0, "number of hot resources (0 = use --skew)")
	fs.Float64Var(&f.wl.HotFraction, "hot-fraction", 0.8, "probability that a step hits a hot resource, in [0, 1]")
	fs.Float64Var(&f.wl.ArrivalRate, "arrival-rate", 0, "transactions per logical second (0 = all at once)")
	fs.DurationVar(&f.think, "think", 0, "logical think time between steps")
	fs.IntVar(&f.concurrency, "concurrency", 32, "transactions active at once")
	fs.DurationVar(&f.opTime, "op-time", 10*time.Microsecond, "logical time per read or write")
	fs.DurationVar(&f.timeout, "timeout", time.Millisecond, "lock timeout (policy timeout)")
	fs.DurationVar(&f.interval, "interval", time.Millisecond, "detection period (policy detect-periodic)")
	fs.DurationVar(&f.restart, "restart-delay", 100*time.Microsecond, "mean delay before an aborted transaction's first restart")
	fs.DurationVar(&f.maxRestart, "max-restart-delay", 0, "cap of the growing restart backoff under no-wait and timeout (0 = 4x the longest an attempt can last)")
	fs.IntVar(&f.maxEvents, "max-events", 100_000_000, "stop a run after this many scheduler events and report it incomplete (0 = no limit)")
	fs.DurationVar(&f.maxTime, "max-time", 0, "stop a run when its logical clock passes this and report it incomplete (0 = no limit)")
	if err := c.parse(fs, args, stdout); err != nil {
		return err
	}
	if err := f.validate(c); err != nil {
		return err
	}
	victim, err := deadlock.ParseVictim(f.victim)
	if err != nil {
		return c.flagErr("victim", "unknown rule %q (youngest, least-work or fewest-locks)", f.victim)
	}
	policies := deadlock.AllPolicies()
	if !f.compare && !f.sweep {
		p, err := deadlock.ParsePolicy(f.policy)
		if err != nil {
			return c.flagErr("policy", "unknown policy %q (detect, detect-periodic, wait-die, wound-wait, no-wait or timeout)", f.policy)
		}
		policies = []deadlock.Policy{p}
	}
	f.wl.ThinkTime = logical(f.think)
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return err
		}
	}
	if f.sweep {
		return runSweep(ctx, f, victim, stdout)
	}
	txns, err := f.wl.Generate()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "workload: seed %d, %d transactions x %d steps over %d resources (read ratio %.2f, skew %.2f, hot %d), concurrency %d\n\n",
		f.wl.Seed, len(txns), f.wl.Length, f.wl.Resources, f.wl.ReadRatio, f.wl.Skew, f.wl.HotResources, f.concurrency)
	var results []*deadlock.Result
	for _, p := range policies {
		if err := ctx.Err(); err != nil {
			return err
		}
		opts := f.options(p, victim)
		res, err := deadlock.Simulate(ctx, txns, opts)
		if errors.Is(err, deadlock.ErrLimit) {
			// What the run did before it was stopped: a thrashing policy
			// shows its aborts and lock requests.
			printTable(stdout, append(results, res))
			return fmt.Errorf("%s: %w after %d lock requests (raise --max-events or --max-time)", p, err, res.LockRequests)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := res.CheckSerializable(); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		results = append(results, res)
		if err := writePictures(f, res, stdout); err != nil {
			return err
		}
	}
	printTable(stdout, results)
	fmt.Fprintln(stdout, "\nevery committed history is conflict-serializable")
	return nil
}

// validate checks every flag's range, so that a bad value is reported with
// its flag's name (the simulator's own checks name the field).
func (f *simulateFlags) validate(c *command) error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	for _, chk := range []struct {
		flag string
		ok   bool
		want string
	}{
		{"txns", f.wl.Transactions >= 1, "at least 1"},
		{"resources", f.wl.Resources >= 1, "at least 1"},
		{"length", f.wl.Length >= 1, "at least 1"},
		{"read-ratio", f.wl.ReadRatio >= 0 && f.wl.ReadRatio <= 1, "in [0, 1]"},
		{"skew", finite(f.wl.Skew) && f.wl.Skew >= 0, "finite and >= 0"},
		{"hot", f.wl.HotResources >= 0 && (f.sweep || f.wl.HotResources <= f.wl.Resources), "in [0, --resources]"},
		{"hot-fraction", f.wl.HotFraction >= 0 && f.wl.HotFraction <= 1, "in [0, 1]"},
		{"arrival-rate", finite(f.wl.ArrivalRate) && f.wl.ArrivalRate >= 0, "finite and >= 0"},
		{"think", f.think >= 0, ">= 0"},
		{"concurrency", f.concurrency >= 1, "at least 1"},
		{"op-time", f.opTime >= 0, ">= 0"},
		{"timeout", f.timeout >= 0, ">= 0"},
		{"interval", f.interval >= 0, ">= 0"},
		{"restart-delay", f.restart >= 0, ">= 0"},
		{"max-restart-delay", f.maxRestart >= 0, ">= 0"},
		{"max-events", f.maxEvents >= 0, ">= 0"},
		{"max-time", f.maxTime >= 0, ">= 0"},
	} {
		if !chk.ok {
			return c.flagErr(chk.flag, "must be %s", chk.want)
		}
	}
	if f.trace && f.out == "" {
		return c.flagErr("trace", "needs --out DIR (the trace is written to a file, never into the current directory)")
	}
	return nil
}

func logical(d time.Duration) deadlock.Time { return deadlock.Time(d / time.Microsecond) }

func (f simulateFlags) options(p deadlock.Policy, v deadlock.Victim) *deadlock.Options {
	return &deadlock.Options{
		Policy: p, Victim: v, Concurrency: f.concurrency, Seed: f.wl.Seed,
		OpTime: logical(f.opTime), LockTimeout: logical(f.timeout), DetectInterval: logical(f.interval),
		RestartDelay: logical(f.restart), MaxRestartDelay: logical(f.maxRestart), Trace: f.trace,
		MaxEvents: f.maxEvents, MaxTime: logical(f.maxTime),
		// The committed history (a record per committed step, the size of
		// the workload) is what CheckSerializable verifies for every run.
		History: true,
	}
}

func printTable(w io.Writer, results []*deadlock.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcommitted\taborted\tdeadlock\tdied\twounded\tno-wait\ttimeout\tdeadlocks found\tlock requests\tmean wait\tp99 wait\tthroughput (tx/s)\t")
	for _, r := range results {
		a := r.Aborts
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.0f\t\n",
			r.Policy, r.Committed, a.Total(), a.Deadlock, a.Died, a.Wounded, a.NoWait, a.Timeout, r.Deadlocks, r.LockRequests, r.MeanWait, r.P99Wait, r.Throughput)
	}
	tw.Flush()
}

// writePictures writes, into f.out, the first deadlock's wait-for graph as
// DOT (and SVG and PNG when Graphviz is installed) and, when tracing, the
// schedule. Without f.out it only prints the first deadlock's cycle.
func writePictures(f simulateFlags, r *deadlock.Result, stdout io.Writer) error {
	if len(r.Graphs) > 0 && f.out == "" {
		fmt.Fprintf(stdout, "%s: first deadlock %v at t=%s (--out DIR writes its wait-for graph)\n", r.Policy, r.Graphs[0].Cycle, r.Graphs[0].Time)
	}
	if len(r.Graphs) > 0 && f.out != "" {
		base := filepath.Join(f.out, "waitfor-"+r.Policy.String())
		if err := writeFile(base+".dot", r.Graphs[0].WriteDOT); err != nil {
			return err
		}
		rendered := ""
		if dot, err := exec.LookPath("dot"); err == nil {
			for _, format := range []string{"svg", "png"} {
				cmd := exec.Command(dot, "-T"+format, "-o", base+"."+format, base+".dot")
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("dot: %w: %s", err, strings.TrimSpace(string(out)))
				}
			}
			rendered = " (+ .svg, .png)"
		}
		fmt.Fprintf(stdout, "%s: first deadlock %v at t=%s -> %s.dot%s\n", r.Policy, r.Graphs[0].Cycle, r.Graphs[0].Time, base, rendered)
	}
	if f.trace {
		path := filepath.Join(f.out, "trace-"+r.Policy.String()+".txt")
		if err := writeFile(path, r.WriteTrace); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: trace -> %s\n", r.Policy, path)
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) (err error) {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fh.Close()) }()
	return write(fh)
}
