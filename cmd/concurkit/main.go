// Command concurkit runs the toolkit's tools: contention benchmarks, the
// two-phase-locking simulator and the migration template generator.
//
// Usage:
//
//	concurkit demo     [flags]   64 concurrent buyers of the last item, per strategy
//	concurkit simulate [flags]   deadlock simulator (2PL with a wait-for graph)
//	concurkit migrate  template [flags]   write up/down migrations for a table
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: concurkit <command> [flags]

commands:
  bench      contention benchmark of every strategy (see concurkit bench -h)
  demo       64 concurrent buyers of the last item under each strategy
  simulate   run the two-phase-locking simulator (see concurkit simulate -h)
  migrate    migration helpers (concurkit migrate template -h)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "concurkit:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "simulate":
		return runSimulate(ctx, rest, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
