package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Exit codes: 0 success (and -h), 1 the command failed, 2 the command line
// is wrong (unknown command or flag, bad or missing flag value).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// errHelp reports that -h was served: the command did nothing else and the
// process exits 0.
var errHelp = errors.New("help requested")

// usageError is a wrong command line. Its message names the command and
// the flag or argument at fault.
type usageError struct {
	cmd string // e.g. "migrate up", for the "-h" hint
	msg string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError for cmd.
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitCode maps run's error to the process exit code.
func exitCode(err error) int {
	var u *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &u):
		return exitUsage
	}
	return exitFail
}

// command describes one command for its -h and for its parent's list.
type command struct {
	name    string // as typed after "concurkit", e.g. "migrate up"
	summary string // one line in the parent's list
	args    string // synopsis after the name, e.g. "[flags]"
	about   string // what it does, in a few lines
	example string // example invocations, one per line
	// subs are a group's subcommands; run is a leaf's body.
	subs []*command
	run  func(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) error
}

// flagSet returns an empty FlagSet for c that prints nothing itself: parse
// reports its errors and help.
func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("concurkit "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs. -h or --help writes c's help to stdout and
// returns errHelp; a bad flag or any positional argument returns a
// usageError naming it.
func (c *command) parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.help(stdout, fs)
			return errHelp
		}
		// The flag package names the flag: "invalid value "x" for flag
		// -buyers: ...", "flag provided but not defined: -nope".
		return usagef(c.name, "concurkit %s: %v", c.name, err)
	}
	if fs.NArg() > 0 {
		return usagef(c.name, "concurkit %s: unexpected argument %q (every option is a --flag)", c.name, fs.Arg(0))
	}
	return nil
}

// flagErr returns a usageError for a bad value of flag name.
func (c *command) flagErr(name, format string, args ...any) error {
	return usagef(c.name, "concurkit %s: --%s: %s", c.name, name, fmt.Sprintf(format, args...))
}

// isSet reports whether the command line set flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// help writes what c does, its usage, its flags (fs, if any) or
// subcommands, and an example.
func (c *command) help(w io.Writer, fs *flag.FlagSet) {
	name := strings.TrimSpace("concurkit " + c.name)
	fmt.Fprintf(w, "%s: %s\n\nUsage:\n  %s %s\n", name, c.summary, name, c.args)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.about))
	}
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "\nCommands:\n")
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		for _, s := range c.subs {
			fmt.Fprintf(tw, "  %s\t%s\n", s.name[strings.LastIndexByte(s.name, ' ')+1:], s.summary)
		}
		tw.Flush()
	}
	if fs != nil {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if c.example != "" {
		fmt.Fprintf(w, "\nExample:\n")
		for l := range strings.SplitSeq(strings.TrimSpace(c.example), "\n") {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(l))
		}
	}
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags and an example.\n", name)
	}
}

// dispatch runs the subcommand of group c named by args[0].
func (c *command) dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		c.help(stderr, nil)
		return usagef(c.name, "%s: missing command", strings.TrimSpace("concurkit "+c.name))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		c.help(stdout, nil)
		return errHelp
	}
	for _, s := range c.subs {
		if s.name[strings.LastIndexByte(s.name, ' ')+1:] == args[0] {
			if s.subs != nil {
				return s.dispatch(ctx, args[1:], stdout, stderr)
			}
			return s.run(ctx, s, args[1:], stdout, stderr)
		}
	}
	return usagef(c.name, "%s: unknown command %q", strings.TrimSpace("concurkit "+c.name), args[0])
}
