package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/concurkit/concurkit/bench"
)

// benchCommand is `concurkit bench`.
func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "contention benchmark: optimistic vs pessimistic on your database, the crossover, plots",
		args:    "[flags]",
		about: `Runs the contention benchmark: each strategy (optimistic CAS, FOR UPDATE,
NOWAIT, SERIALIZABLE, advisory and distributed locks with fenced writes, and
a single UPDATE as the reference ceiling) on each database, over hot rows or
Zipfian keys, worker counts and offered loads. Per cell: committed ops/s,
retries and aborts per op, operations given up, latency percentiles (from
the intended start: no coordinated omission), WAL/log syncs per commit, and
a correctness check (lost updates make a cell FAILED, not fast).

The benchmark works in its own schema (PostgreSQL) and database (MariaDB),
--schema, and drops them at the end unless --keep. Results go to --out:
results.md, results.csv, summary.json, hlog/ (HdrHistogram interval logs)
and plots/ (PNG); the table and the verdicts are printed on stdout.

On a MariaDB Galera cluster, give --mysql-dsn one DSN per node, separated by
commas: each cell's connections are opened on the nodes in turn (a node that
refuses is skipped), setup and the check run on the first node that answers,
and each cell reports the nodes' certification conflicts (cert fail: error
1213 at COMMIT or from a replicated write, retried) and its commits by node;
the verdict says what multi-primary did to FOR UPDATE in that run.

The default (--grid quick) takes about four minutes on two cores; --grid
full about an hour; --fast is a smoke run of seconds. The exit status is
non-zero when a correctness check FAILED (the hidden lossy strategy
excepted) or, with --fail-on-regression, when --baseline finds a regression.`,
		example: `concurkit bench --db postgres --workload counter,transfer --rows 1,16 --workers 4,16
concurkit bench --postgres-url 'postgres://postgres@127.0.0.1:5432/postgres' --mysql-dsn 'root@tcp(127.0.0.1:3306)/' --baseline bench-results/OLD/summary.json
concurkit bench --db mariadb --mysql-dsn 'root@tcp(10.0.0.1:3306)/,root@tcp(10.0.0.2:3306)/,root@tcp(10.0.0.3:3306)/' --rows 1 --workers 6`,
		run: runBench,
	}
}

type benchFlags struct {
	db, workloads, strategies, rows, workers, zipf, rates, reads, open, slo string
	out, baseline                                                           string
	fast, list, quiet, failOnRegression                                     bool
	tolerance                                                               float64
	etcd                                                                    string
	cfg                                                                     bench.Config
}

func runBench(ctx context.Context, cmd *command, args []string, stdout, stderr io.Writer) error {
	var f benchFlags
	fs := cmd.flagSet()
	c := &f.cfg
	fs.StringVar(&f.db, "db", "all", "databases: postgres, mariadb or all")
	fs.StringVar(&c.PostgresURL, "postgres-url", "", "PostgreSQL URL (default $CONCURKIT_POSTGRES_URL, else "+bench.DefaultPostgresURL+")")
	fs.StringVar(&c.MySQLDSN, "mysql-dsn", "", "MariaDB/MySQL DSN, or a Galera cluster's nodes as comma-separated DSNs (clients spread over them) (default $CONCURKIT_MYSQL_DSN, else "+bench.DefaultMySQLDSN+")")
	fs.StringVar(&c.RedisAddr, "redis-addr", "", "Redis for redis-fenced (default $CONCURKIT_REDIS_ADDR, else "+bench.DefaultRedisAddr+")")
	fs.StringVar(&f.etcd, "etcd-endpoints", "", "etcd endpoints for etcd-fenced, comma-separated (default $CONCURKIT_ETCD_ENDPOINT, else "+bench.DefaultEtcdEndpoint+")")
	fs.StringVar(&c.Schema, "schema", bench.DefaultSchema, "schema (PostgreSQL) and database (MariaDB) the benchmark creates and drops")
	fs.BoolVar(&c.Keep, "keep", false, "keep the schema and its tables after the run")
	fs.StringVar(&c.Grid, "grid", bench.GridQuick, "grid preset: quick (about 4 min), full (about 1 h) or fast (seconds)")
	fs.BoolVar(&f.fast, "fast", false, "smoke run: same as --grid fast (numbers not meaningful)")
	fs.StringVar(&f.workloads, "workload", "", "workloads, comma-separated: counter, inventory, transfer, mixed (default: the grid's)")
	fs.StringVar(&f.strategies, "strategies", "", "strategies, comma-separated (default: every visible one; --list shows them)")
	fs.StringVar(&f.rows, "rows", "", "hot-row counts, e.g. 1,4,16,256 (crossed with --workers)")
	fs.StringVar(&f.workers, "workers", "", "worker counts, e.g. 1,4,16,32 (crossed with --rows)")
	fs.StringVar(&f.zipf, "zipf", "", "Zipfian θ values over --keys keys, e.g. 0,0.5,0.9,0.99,1.2")
	fs.IntVar(&c.Keys, "keys", bench.DefaultKeys, "Zipfian key space")
	fs.DurationVar(&c.Duration, "duration", 0, "measured time per cell (default: the grid's; quick 1s, full 5s)")
	fs.DurationVar(&c.Warmup, "warmup", 0, "warmup per cell before measuring (default: the grid's; negative: none)")
	fs.Int64Var(&c.Ops, "ops", 0, "end each cell after this many operations (--duration still bounds it)")
	fs.StringVar(&f.slo, "slo", "", "latency target the verdicts judge by, e.g. p99=50ms: the strategy that meets it at the highest offered load, or that none does")
	fs.StringVar(&f.rates, "rate", "", "open-loop offered loads: ops/s (500,1000), fractions of the measured maximum (x0.5,x1.1) or auto; 'none' for no open loop")
	fs.StringVar(&f.open, "open-strategies", "", "strategies that get the open-loop cells, comma-separated (default: quick grid cas,for-update; else all)")
	fs.StringVar(&c.Arrival, "arrival", bench.ArrivalPoisson, "open-loop arrivals: poisson or fixed")
	fs.Float64Var(&c.ReadRatio, "read-ratio", bench.DefaultReadRatio, "mixed workload: probability that an operation is a read")
	fs.StringVar(&f.reads, "reads", "plain,share", "mixed workload read modes: plain (MVCC snapshot), share (FOR SHARE in a transaction)")
	fs.Int64Var(&c.Stock, "stock", bench.DefaultStock, "inventory: initial stock per row")
	fs.Int64Var(&c.Balance, "balance", bench.DefaultBalance, "transfer: initial balance per account")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of key choice and arrivals")
	fs.DurationVar(&c.Interval, "interval", bench.DefaultInterval, "HdrHistogram log interval")
	fs.DurationVar(&c.OpTimeout, "op-timeout", bench.DefaultOpTimeout, "bound of one operation, retries included")
	fs.DurationVar(&c.SyncProbe, "sync-probe", 0, "time of each sync-rate measurement (disk, commit loop); negative skips them (default: the grid's)")
	fs.StringVar(&f.out, "out", "", "output directory (default bench-results/<timestamp>)")
	fs.StringVar(&f.baseline, "baseline", "", "summary.json of an earlier run: print ratios and flag regressions")
	fs.Float64Var(&f.tolerance, "tolerance", bench.DefaultTolerance, "relative change --baseline flags as a regression")
	fs.BoolVar(&f.failOnRegression, "fail-on-regression", false, "exit non-zero when --baseline finds a regression")
	fs.BoolVar(&f.list, "list", false, "list the strategies and exit")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")

	if err := cmd.parse(fs, args, stdout); err != nil {
		return err
	}
	if f.list {
		for _, s := range bench.Strategies() {
			hidden := ""
			if s.Hidden {
				hidden = " (hidden: only when named)"
			}
			fmt.Fprintf(stdout, "%-18s %-9s %-17s %s%s\n", s.Name, s.Kind, strings.Join(s.DBs, ","), s.Description, hidden)
		}
		return nil
	}
	if err := f.config(cmd, fs); err != nil {
		return err
	}
	var base *bench.Summary
	if f.baseline != "" {
		b, err := bench.LoadSummary(f.baseline)
		if err != nil {
			return cmd.flagErr("baseline", "%v", err)
		}
		base = b
	}
	start := time.Now()
	out := f.out
	if out == "" {
		out = bench.DefaultOutDir(start)
	}
	c.Args = args
	c.Log = stderr
	announce := func(p bench.Progress) {
		fmt.Fprintf(stderr, "bench: %d cells, about %s; results in %s\n", p.Total, p.Remaining.Round(time.Second), out)
	}
	c.Progress = func(p bench.Progress) {
		if p.Cell == "" {
			announce(p)
		}
	}
	if !f.quiet {
		var bar *progressbar.ProgressBar
		c.Progress = func(p bench.Progress) {
			if bar == nil {
				bar = progressbar.NewOptions(p.Total,
					progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("bench"),
					progressbar.OptionShowCount(),
					progressbar.OptionSetPredictTime(true),
					progressbar.OptionShowElapsedTimeOnFinish(),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(200*time.Millisecond),
					progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }),
				)
			}
			if p.Cell == "" {
				announce(p)
			} else {
				bar.Describe(fmt.Sprintf("%-60.60s", p.Cell))
				_ = bar.Set(p.Done)
			}
		}
	}
	sum, runErr := bench.Run(ctx, c)
	if sum == nil || (runErr != nil && ctx.Err() == nil) {
		// Bad flags, or no cell could run (the servers are unreachable):
		// nothing worth a table. An interrupted run still writes what it
		// measured.
		return runErr
	}
	if base != nil {
		sum.Baseline = bench.Compare(base, sum, f.tolerance)
	}
	if err := sum.WriteTable(stdout); err != nil {
		return err
	}
	files, err := sum.WriteFiles(out)
	if err != nil {
		return fmt.Errorf("bench: write results to %s: %w", out, err)
	}
	fmt.Fprintf(stdout, "\n%s in %s: %s\n", describeFiles(files), out, time.Since(start).Round(time.Second))
	if runErr != nil {
		return runErr
	}
	if failed := sum.Failed(); len(failed) > 0 {
		ids := make([]string, 0, len(failed))
		for _, c := range failed {
			ids = append(ids, c.ID)
		}
		return fmt.Errorf("bench: correctness check FAILED in %d cells: %s", len(failed), strings.Join(ids, ", "))
	}
	if f.failOnRegression && sum.Baseline != nil && sum.Baseline.Regressions > 0 {
		return fmt.Errorf("bench: %d regressions against %s", sum.Baseline.Regressions, f.baseline)
	}
	return nil
}

// describeFiles summarises the files written: "wrote summary.json,
// results.csv, results.md, 12 hlog files, 5 plots".
func describeFiles(files []string) string {
	var named []string
	var hlogs, plots int
	for _, f := range files {
		switch {
		case strings.HasPrefix(f, bench.DirHlog+"/"):
			hlogs++
		case strings.HasPrefix(f, bench.DirPlots+"/"):
			plots++
		default:
			named = append(named, filepath.Base(f))
		}
	}
	slices.Sort(named)
	return fmt.Sprintf("wrote %s, %d hlog files, %d plots", strings.Join(named, ", "), hlogs, plots)
}

// config fills f.cfg from the list flags; errors name the flag.
func (f *benchFlags) config(cmd *command, fs *flag.FlagSet) error {
	c := &f.cfg
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.fast {
		if set["grid"] && c.Grid != bench.GridFast {
			return cmd.flagErr("fast", "--fast and --grid are exclusive")
		}
		c.Grid = bench.GridFast
	}
	switch f.db {
	case "all", "":
	case bench.Postgres, bench.MariaDB:
		c.DBs = []string{f.db}
	default:
		return cmd.flagErr("db", "%q: want postgres, mariadb or all", f.db)
	}
	if f.etcd != "" {
		c.EtcdEndpoints = splitList(f.etcd)
	}
	c.Workloads = splitList(f.workloads)
	c.Strategies = splitList(f.strategies)
	c.OpenStrategies = splitList(f.open)
	var err error
	if c.Rows, err = intList(cmd, "rows", f.rows); err != nil {
		return err
	}
	if c.Workers, err = intList(cmd, "workers", f.workers); err != nil {
		return err
	}
	if f.zipf != "" {
		for _, s := range splitList(f.zipf) {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return cmd.flagErr("zipf", "%q: not a number", s)
			}
			c.Zipf = append(c.Zipf, v)
		}
	}
	if c.SLO, err = bench.ParseSLO(f.slo); err != nil {
		return cmd.flagErr("slo", "%v", err)
	}
	switch f.rates {
	case "":
	case "none":
		c.Rates = []bench.Rate{}
	default:
		if c.Rates, err = bench.ParseRates(f.rates); err != nil {
			return cmd.flagErr("rate", "%v", err)
		}
	}
	if set["reads"] {
		c.Reads = splitList(f.reads)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intList(cmd *command, name, s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		v, err := strconv.Atoi(p)
		if err != nil {
			return nil, cmd.flagErr(name, "%q: not an integer", p)
		}
		out = append(out, v)
	}
	return out, nil
}
