package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/concurkit/concurkit/deadlock"
)

const simulateUsage = `usage: concurkit simulate [flags]

Runs the two-phase-locking simulator on a seeded workload and prints
committed/aborted counts, deadlocks, waits and throughput per policy.
Writes the wait-for graph of the first deadlock (waitfor-POLICY.dot, and
.svg when Graphviz's dot is installed) and, with --trace, the schedule
(trace-POLICY.txt, one line per event: large when lock timeouts thrash)
into --out. Every run keeps its committed history (a record per committed
step) to check that it is conflict-serializable. --sweep runs every
policy over contention (hot resources 1 to 10,000) and writes sweep.md,
sweep.png and sweep-aborts.png.

Under no-wait and timeout a run ends only because restart delays grow and
are random (see the deadlock package's "Progress"), so every run is
bounded: --max-events (scheduler events, about 15 s of CPU per 100
million) and --max-time (logical time) stop it, print what it did so far
and exit with an error.

flags:
`

type simulateFlags struct {
	policy, victim  string
	compare, sweep  bool
	trace           bool
	out             string
	wl              deadlock.Workload
	concurrency     int
	opTime, timeout time.Duration
	interval        time.Duration
	restart, think  time.Duration
	maxRestart      time.Duration
	maxEvents       int
	maxTime         time.Duration
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f simulateFlags
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simulateUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.policy, "policy", "detect", "policy: detect, detect-periodic, wait-die, wound-wait, no-wait, timeout")
	fs.StringVar(&f.victim, "victim", "youngest", "deadlock victim: youngest, least-work, fewest-locks")
	fs.BoolVar(&f.compare, "compare", false, "run every policy on the same workload")
	fs.BoolVar(&f.sweep, "sweep", false, "compare every policy over contention (hot resources 1 to 10,000); writes sweep.md and PNG plots")
	fs.BoolVar(&f.trace, "trace", false, "write the schedule trace to trace-POLICY.txt")
	fs.StringVar(&f.out, "out", ".", "directory for the pictures and traces")
	fs.Uint64Var(&f.wl.Seed, "seed", 1, "workload seed (same seed, same run)")
	fs.IntVar(&f.wl.Transactions, "txns", 2000, "number of transactions")
	fs.IntVar(&f.wl.Resources, "resources", 1000, "number of resources (rows)")
	fs.IntVar(&f.wl.Length, "length", 8, "reads and writes per transaction")
	fs.Float64Var(&f.wl.ReadRatio, "read-ratio", 0.5, "probability that a step is a read (S lock)")
	fs.Float64Var(&f.wl.Skew, "skew", 0, "Zipf exponent of resource popularity (0 = uniform)")
	fs.IntVar(&f.wl.HotResources, "hot", 0, "number of hot resources (0 = use --skew)")
	fs.Float64Var(&f.wl.HotFraction, "hot-fraction", 0.8, "probability that a step hits a hot resource")
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("simulate: unexpected argument %q", fs.Arg(0))
	}
	f.wl.ThinkTime = logical(f.think)
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	if f.sweep {
		return runSweep(ctx, f, stdout)
	}
	victim, err := deadlock.ParseVictim(f.victim)
	if err != nil {
		return err
	}
	policies := deadlock.AllPolicies()
	if !f.compare {
		p, err := deadlock.ParsePolicy(f.policy)
		if err != nil {
			return err
		}
		policies = []deadlock.Policy{p}
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
		if err := deadlock.CheckSerializable(res.History); err != nil {
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

// writePictures writes the first deadlock's wait-for graph as DOT (and SVG
// and PNG when Graphviz is installed) and, when tracing, the schedule.
func writePictures(f simulateFlags, r *deadlock.Result, stdout io.Writer) error {
	if len(r.Graphs) > 0 {
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
