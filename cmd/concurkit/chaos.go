package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/concurkit/concurkit/chaos"
)

func chaosCommand() *command {
	return &command{
		name:    "chaos",
		summary: "fault-injection runs with a history checker: does the safety mechanism hold?",
		args:    "[flags]",
		about: `Runs a workload against a backend in client processes (this program, started
again), injects faults from a seed (client pauses and kills; through an
in-process Toxiproxy per server: latency, resets, answers dropped after the
request was applied, frozen servers; the run's database sessions terminated;
with --server, server processes frozen and killed), records every operation's
invocation and completion, and checks the history. --unsafe runs the negative control (the
workload with its safety mechanism off): the checker must find anomalies
there, or its verdict on the safe run means nothing.

Workloads: counter (a lock lease, read, write + 1 through fencing tokens;
backends redis, redlock, zookeeper, etcd, dynamodb, postgres; the counter lives
in PostgreSQL), election (every client campaigns; the leader increments the
counter with its term as the token; same backends; failover times noted),
semaphore (N permits, a fenced counter per permit; same backends),
register (read/write/cas per key through the optimistic
adapters, checked for linearizability with porcupine), idempotent (HTTP
requests with idempotency keys, cancelled and retried; postgres, mysql,
dynamodb for both), ratelimit (a fixed-window limiter; redis, postgres),
messages (outbox, relay, broker, inbox; nats, amqp) and saga (postgres, mysql).
--unsafe: no fencing, no version check, no keys, check-then-increment, no inbox,
no saga store.

Servers come from the CONCURKIT_* environment variables (scripts/services.sh
env prints them), defaulting to the ports scripts/services.sh uses. A progress
line is printed per fault, then the summary; --out gets the history, the
faults, the report and any porcupine visualisation. Exit status 1 when the
verdict is INVALID.`,
		example: `concurkit chaos --workload counter --backend redis --duration 60s --seed 7
concurkit chaos --workload counter --backend etcd --unsafe --out /tmp/chaos
concurkit chaos --workload register --backend mysql --nemesis drop,reset --options sql_mode=SIMULTANEOUS_ASSIGNMENT
concurkit chaos --workload idempotent --backend dynamodb --duration 5m
concurkit chaos --backend redis --server redis=/tmp/concurkit/run/redis.pid@127.0.0.1:16379`,
		run: runChaos,
	}
}

func runChaos(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) error {
	var cfg chaos.Config
	var nemeses, options string
	fs := c.flagSet()
	fs.StringVar(&cfg.Workload, "workload", "counter", "workload: "+strings.Join(chaos.Workloads(), ", "))
	fs.StringVar(&cfg.Backend, "backend", "", "backend under test (see above; required)")
	fs.BoolVar(&cfg.Unsafe, "unsafe", false, "negative control: the workload with its safety mechanism off")
	fs.IntVar(&cfg.Workers, "workers", chaos.DefaultWorkers, "client processes")
	fs.DurationVar(&cfg.Duration, "duration", chaos.DefaultDuration, "how long the clients run")
	fs.DurationVar(&cfg.TTL, "ttl", chaos.DefaultTTL, "lease TTL; faults last 1-3x this")
	fs.DurationVar(&cfg.Interval, "interval", 0, "mean quiet time between faults (default: the TTL)")
	fs.StringVar(&nemeses, "nemesis", "", "faults to inject, comma-separated, or none (default: every one that applies: "+strings.Join(chaos.Nemeses, ", ")+")")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the fault plan and the clients (0: random, printed)")
	fs.StringVar(&options, "options", "", "workload options, key=value,key=value (e.g. isolation=repeatable-read)")
	servers, paused := serverFlag{}, serverFlag{}
	fs.Var(servers, "server", "NAME=PIDFILE[@HOST:PORT]: a server the nemesis may freeze and kill (repeatable; only servers you may break). With @HOST:PORT a killed server is run again as it ran (same command line, its data kept); without, --restart brings it back")
	fs.Var(paused, "pause-server", "NAME=PIDFILE: a server the nemesis may freeze, never kill (repeatable)")
	var restart string
	fs.StringVar(&restart, "restart", "scripts/services.sh up {name}", "command that brings back a killed --server given without @HOST:PORT; {name} is its NAME")
	fs.StringVar(&cfg.Out, "out", "", "directory for history.jsonl, faults.jsonl, report.json, summary.txt (default: none)")
	if err := c.parse(fs, args, stdout); err != nil {
		return err
	}
	if cfg.Backend == "" {
		return c.flagErr("backend", "required")
	}
	switch nemeses {
	case "": // every one that applies
	case "none":
		cfg.Nemeses = []string{}
	default:
		cfg.Nemeses = strings.Split(nemeses, ",")
	}
	if options != "" {
		cfg.Options = map[string]string{}
		for kv := range strings.SplitSeq(options, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return c.flagErr("options", "%q is not key=value", kv)
			}
			cfg.Options[k] = v
		}
	}
	if len(servers)+len(paused) > 0 {
		cfg.Servers = map[string]chaos.Server{}
		for name, spec := range servers {
			pidfile, addr, _ := strings.Cut(spec, "@")
			s := &chaos.PidFileServer{PidFile: pidfile, Addr: addr, Reexec: addr != ""}
			if !s.Reexec {
				s.RestartCommand = strings.Fields(strings.ReplaceAll(restart, "{name}", name))
			}
			cfg.Servers[name] = s
		}
		for name, spec := range paused {
			pidfile, _, _ := strings.Cut(spec, "@")
			cfg.Servers[name] = &chaos.PidFileServer{PidFile: pidfile}
		}
	}
	cfg.Progress = stdout
	start := time.Now()
	s, err := chaos.Run(ctx, &cfg)
	if errors.Is(err, chaos.ErrInvalidConfig) {
		return usagef(c.name, "concurkit %v", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, s)
	if cfg.Out != "" {
		fmt.Fprintf(stdout, "  files:      %s\n", cfg.Out)
	}
	if !s.Report.Valid {
		return fmt.Errorf("chaos: verdict INVALID after %s (seed %d)", time.Since(start).Round(time.Second), s.Seed)
	}
	return nil
}

// serverFlag collects --server NAME=PIDFILE.
type serverFlag map[string]string

func (f serverFlag) String() string { return "" }

func (f serverFlag) Set(v string) error {
	name, file, ok := strings.Cut(v, "=")
	if !ok || name == "" || file == "" {
		return fmt.Errorf("want NAME=PIDFILE, got %q", v)
	}
	f[name] = file
	return nil
}
