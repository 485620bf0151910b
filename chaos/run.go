package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/concurkit/concurkit"
)

// Defaults of Config's zero fields.
const (
	DefaultWorkers  = 5
	DefaultDuration = 30 * time.Second
	DefaultTTL      = time.Second
)

// ErrInvalidConfig matches the errors Run returns for a Config it cannot
// run (it also matches concurkit.ErrInvalidArgument).
var ErrInvalidConfig = concurkit.InvalidArgumentError("chaos: invalid config")

// Config describes one run. Zero fields mean their defaults.
type Config struct {
	// Workload is "counter" (the fenced counter), "register",
	// "idempotent", "ratelimit", "messages" or "saga" (see the package
	// doc). Required.
	Workload string
	// Backend is the system under test: for counter a lock backend
	// ("redis", "redlock", "zookeeper", "etcd", "dynamodb", "postgres"),
	// for register and idempotent a database ("postgres", "mysql",
	// "dynamodb"), for ratelimit "redis" or "postgres", for messages the
	// broker ("nats", "amqp"), for saga "postgres" or "mysql". Required.
	Backend string
	// Unsafe runs the negative control: the workload with its safety
	// mechanism off (counter: no fencing). A run whose checker finds
	// nothing there says little about the safe run.
	Unsafe bool
	// Workers is the number of client processes. Default DefaultWorkers.
	Workers int
	// Duration is how long clients run. Default DefaultDuration.
	Duration time.Duration
	// TTL is the lease TTL, which also scales the faults' durations.
	// Default DefaultTTL.
	TTL time.Duration
	// Interval is the mean quiet time between two faults of a stream (the
	// clients' pauses and kills, and the system's faults, run at once).
	// Default the TTL. The first fault's wait starts when the first
	// operation completes OK, not when the run starts.
	Interval time.Duration
	// Nemeses are the kinds of fault to inject (see Nemeses); nil means
	// all, an empty non-nil slice none.
	Nemeses []string
	// Seed fixes the fault plan and the clients' random choices. Zero
	// picks one at random (reported in the Summary).
	Seed uint64
	// Endpoints are the servers. The zero value means EndpointsFromEnv.
	Endpoints *Endpoints
	// Options are workload settings ("isolation", "sql_mode", …; see the
	// workloads).
	Options map[string]string
	// Servers are server processes the run may freeze and kill
	// (NemesisServerPause, NemesisServerKill), by name. Only servers the
	// run may break: see Server.
	Servers map[string]Server
	// Failovers are replicated servers NemesisFailover may fail over, by
	// the name of the server they stand for ("redis": the proxy of
	// Endpoints.Redis, which must be the primary's address at the start).
	Failovers map[string]Failover
	// Partitioner cuts the servers of a cluster off from one another
	// (NemesisPartition), e.g. a *testkit.Netns the servers run in.
	Partitioner Partitioner
	// Command is the argv that starts a client process: a program whose
	// main calls WorkerMain when IsWorker. Default: this executable, no
	// arguments.
	Command []string
	// Out is a directory to write history.jsonl, faults.jsonl,
	// report.json and summary.txt to. Empty writes nothing.
	Out string
	// Progress, if set, receives a line per fault as it ends.
	Progress io.Writer
}

// Summary is the outcome of a run.
type Summary struct {
	Workload string        `json:"workload"`
	Backend  string        `json:"backend"`
	Unsafe   bool          `json:"unsafe"`
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration"`
	Workers  int           `json:"workers"`
	// Ops counts the history's operations by kind and outcome
	// ("incr/ok").
	Ops map[string]int `json:"ops"`
	// Faults counts the faults injected by kind (those that could not be
	// injected are in Skipped).
	Faults  map[string]int `json:"faults"`
	Skipped int            `json:"skipped,omitempty"`
	// SkipReason is why the first fault that was not injected failed.
	SkipReason string `json:"skip_reason,omitempty"`
	// Report is the checker's verdict.
	Report *Report `json:"report"`
}

// String formats the summary for a terminal.
func (s *Summary) String() string {
	var b strings.Builder
	mode := "safe"
	if s.Unsafe {
		mode = "unsafe (negative control)"
	}
	fmt.Fprintf(&b, "chaos %s on %s, %s: %d clients, %s, seed %d\n", s.Workload, s.Backend, mode, s.Workers, s.Duration.Round(time.Millisecond), s.Seed)
	fmt.Fprintf(&b, "  operations: %s\n", counts(s.Ops))
	fmt.Fprintf(&b, "  faults:     %s", counts(s.Faults))
	if s.Skipped > 0 {
		fmt.Fprintf(&b, " (%d not injected; the first: %s)", s.Skipped, s.SkipReason)
	}
	fmt.Fprintf(&b, "\n  anomalies:  %s\n", counts(s.Report.Counts))
	for _, n := range s.Report.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	verdict := "VALID"
	if !s.Report.Valid {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "  verdict:    %s\n", verdict)
	return b.String()
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// workload is one of the harness's workloads.
type workload interface {
	// systems lists the servers the workload uses with backend, or an
	// error for a backend it does not support.
	systems(backend string) ([]string, error)
	// setup prepares storage for the run (direct endpoints).
	setup(ctx context.Context, e *env) error
	// client is one client process's loop, until ctx ends (proxied
	// endpoints).
	client(ctx context.Context, c *client) error
	// check judges the history against what storage holds.
	check(ctx context.Context, e *env, ops []Op) (*Report, error)
	// teardown removes what setup made.
	teardown(ctx context.Context, e *env) error
}

var workloads = map[string]workload{
	"counter":    counterWorkload{},
	"election":   electionWorkload{},
	"register":   registerWorkload{},
	"idempotent": idempotentWorkload{},
	"ratelimit":  ratelimitWorkload{},
	"saga":       sagaWorkload{},
	"semaphore":  semaphoreWorkload{},
	"messages":   messagesWorkload{},
}

// Workloads lists the workload names Config.Workload accepts.
func Workloads() []string { return slices.Sorted(maps.Keys(workloads)) }

// Run runs a workload against its backend with faults injected, checks
// the recorded history and returns the summary. It returns an error (and
// no verdict) when the run itself could not be carried out: a bad Config
// (ErrInvalidConfig), a server that does not answer at setup, a client
// process that failed on its own, ctx ending.
func Run(ctx context.Context, cfg *Config) (*Summary, error) {
	c, e, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	w := workloads[c.Workload]
	systems, _ := w.systems(c.Backend) // checked by resolve
	direct := e.Endpoints
	px, proxied, err := startProxies(direct, systems)
	if err != nil {
		return nil, err
	}
	defer px.close()
	if err := waitReady(ctx, systems, direct); err != nil {
		return nil, err
	}
	if err := w.setup(ctx, &e); err != nil {
		return nil, err
	}
	defer func() { _ = w.teardown(context.WithoutCancel(ctx), &e) }()

	var hist History
	s := spec{env: e}
	s.Endpoints = proxied
	if s.Endpoints.Postgres != "" {
		s.Endpoints.Postgres = withApplicationName(s.Endpoints.Postgres, e.Run)
	}
	crew := newCrew(c.Command, s, &hist)
	for range c.Workers {
		if err := crew.start(); err != nil {
			_ = crew.stop(time.Second, nil)
			return nil, err
		}
	}
	start := time.Now()
	nctx, cancel := context.WithTimeout(ctx, c.Duration)
	n := &nemesis{crew: crew, proxies: px, killed: map[int]bool{}, env: &e, servers: c.Servers,
		serverNames: slices.Sorted(maps.Keys(c.Servers)),
		failovers:   c.Failovers, failoverNames: slices.Sorted(maps.Keys(c.Failovers)),
		partitioner: c.Partitioner}
	for _, sys := range systems {
		if sys == "postgres" || sys == "mysql" {
			n.databases = append(n.databases, sys)
		}
	}
	// Faults begin once the workload works: a client slow to start (built
	// with -race on a busy machine) must not meet every fault before its
	// first operation, leaving a run with nothing to judge.
	select {
	case <-crew.working:
	case <-nctx.Done():
	}
	faults := n.runAll(nctx, c.Seed, c.Duration, c.TTL, c.Interval, c.Nemeses, func(f Fault) {
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, "%7.1fs %-7s %-12s %s%s\n", time.Since(start).Seconds(), f.Kind, f.Target, f.For.Round(time.Millisecond), errSuffix(f.Error))
		}
	})
	<-nctx.Done()
	cancel()
	elapsed := time.Since(start)
	stopErr := crew.stop(10*time.Second+2*c.TTL, n.killed)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if stopErr != nil {
		return nil, stopErr
	}
	ops := hist.Ops()
	if err := waitReady(ctx, systems, direct); err != nil {
		return nil, err
	}
	rep, err := w.check(ctx, &e, ops)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Workload: c.Workload, Backend: c.Backend, Unsafe: c.Unsafe, Seed: c.Seed, Duration: elapsed,
		Workers: c.Workers, Ops: map[string]int{}, Faults: map[string]int{}, Report: rep}
	for _, op := range ops {
		sum.Ops[op.Kind+"/"+op.Outcome.String()]++
	}
	for _, f := range faults {
		if f.Error != "" {
			if sum.Skipped == 0 {
				sum.SkipReason = f.Kind + " " + f.Target + ": " + f.Error
			}
			sum.Skipped++
		} else {
			sum.Faults[f.Kind]++
		}
	}
	if c.Out != "" {
		if err := writeOut(c.Out, sum, ops, faults); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (not injected: " + s + ")"
}

// resolve checks cfg and applies the defaults, on a copy.
func resolve(cfg *Config) (Config, env, error) {
	if cfg == nil {
		return Config{}, env{}, fmt.Errorf("%w: nil config", ErrInvalidConfig)
	}
	c := *cfg
	w, ok := workloads[c.Workload]
	if !ok {
		return c, env{}, fmt.Errorf("%w: workload %q (want one of %s)", ErrInvalidConfig, c.Workload, strings.Join(Workloads(), ", "))
	}
	if _, err := w.systems(c.Backend); err != nil {
		return c, env{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Workers < 0 || c.Duration < 0 || c.TTL < 0 || c.Interval < 0 {
		return c, env{}, fmt.Errorf("%w: negative workers, duration, ttl or interval", ErrInvalidConfig)
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Interval == 0 {
		c.Interval = c.TTL
	}
	if c.Nemeses == nil {
		systems, _ := w.systems(c.Backend)
		sql := slices.Contains(systems, "postgres") || slices.Contains(systems, "mysql")
		for _, k := range Nemeses {
			switch {
			case k == NemesisServerPause && len(c.Servers) == 0:
			case k == NemesisServerKill && !slices.ContainsFunc(slices.Collect(maps.Values(c.Servers)), canRestart):
			case k == NemesisFailover && len(c.Failovers) == 0:
			case k == NemesisPartition && c.Partitioner == nil:
			case k == NemesisTerminate && !sql:
			default:
				c.Nemeses = append(c.Nemeses, k)
			}
		}
	}
	for _, k := range c.Nemeses {
		if !slices.Contains(Nemeses, k) {
			return c, env{}, fmt.Errorf("%w: nemesis %q (want some of %s)", ErrInvalidConfig, k, strings.Join(Nemeses, ", "))
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	if c.Seed == 0 {
		for _, x := range b {
			c.Seed = c.Seed<<8 | uint64(x)
		}
		c.Seed >>= 12 // short enough to type back in
	}
	if len(c.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return c, env{}, fmt.Errorf("chaos: find this executable: %w", err)
		}
		c.Command = []string{exe}
	}
	eps := EndpointsFromEnv()
	if c.Endpoints != nil {
		eps = *c.Endpoints
	}
	opts := maps.Clone(c.Options)
	if c.Out != "" {
		if opts == nil {
			opts = map[string]string{}
		}
		opts["out"] = c.Out // where a checker writes its visualisations
	}
	e := env{Workload: c.Workload, Backend: c.Backend, Unsafe: c.Unsafe, Seed: c.Seed, TTL: c.TTL,
		Endpoints: eps, Options: opts, Run: "chaos_" + hex.EncodeToString(b[:4]), Nemeses: c.Nemeses}
	return c, e, nil
}

// writeOut writes a run's files to dir.
func writeOut(dir string, s *Summary, ops []Op, faults []Fault) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	var errs []error
	write := func(name string, fn func(io.Writer) error) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			return
		}
		errs = append(errs, fn(f), f.Close())
	}
	write("history.jsonl", func(w io.Writer) error { return WriteHistory(w, ops) })
	write("faults.jsonl", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, f := range faults {
			if err := enc.Encode(f); err != nil {
				return err
			}
		}
		return nil
	})
	write("report.json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	})
	write("summary.txt", func(w io.Writer) error { _, err := io.WriteString(w, s.String()); return err })
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chaos: write %s: %w", dir, err)
	}
	return nil
}
