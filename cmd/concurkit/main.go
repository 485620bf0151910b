// Command concurkit runs the toolkit's tools: a demo of the concurrency
// strategies on real databases, the two-phase-locking simulator, and the
// migrations (concurkit's own tables, and templates for yours).
//
// Usage:
//
//	concurkit chaos    [flags]            fault injection + history checker (safe run and negative control)
//	concurkit demo     [flags]            64 concurrent buyers of the last item, per strategy
//	concurkit simulate [flags]            deadlock simulator (2PL with a wait-for graph)
//	concurkit migrate  up|down|version    concurkit's own tables (history: concurkit_schema_migrations)
//	concurkit migrate  template [flags]   up/down migrations for your own tables
//
// Every command and subcommand explains itself, its flags and an example
// with -h. Nothing is written to the current directory unless a flag asks
// for it (--out). Exit status: 0 success or -h, 1 the command failed, 2 the
// command line is wrong (the message names the flag).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/concurkit/concurkit/chaos"
)

// root is the command tree. Its leaves' run functions live next to their
// flags (demo.go, simulate.go, migrate.go).
func root() *command {
	return &command{
		summary: "database concurrency control: contention benchmark, demo, 2PL simulator, migrations",
		args:    "<command> [flags]",
		about: `concurkit shows and applies the toolkit's concurrency-control tools on real
databases: optimistic CAS, pessimistic locks, fencing tokens, and a
two-phase-locking simulator.`,
		example: `concurkit bench --db postgres --workload counter --rows 1,16 --workers 8
concurkit demo
concurkit migrate up --dialect postgres --dsn postgres://app@localhost/app`,
		subs: []*command{benchCommand(), chaosCommand(), demoCommand(), simulateCommand(), migrateCommand()},
	}
}

func main() {
	if chaos.IsWorker() { // a client process of a chaos run
		os.Exit(chaos.WorkerMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainExit(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// mainExit runs the command line args and returns the process exit code,
// reporting a failure on stderr.
func mainExit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	code := exitCode(err)
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "concurkit") {
			msg = "concurkit: " + msg
		}
		fmt.Fprintln(stderr, msg)
		var u *usageError
		if errors.As(err, &u) {
			fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", strings.TrimSpace("concurkit "+u.cmd))
		}
	}
	return code
}

// run runs the command line args; -h is a success (nil).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := root().dispatch(ctx, args, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}
