package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// commandPaths lists the command line of every command, groups included
// ("" is concurkit itself).
func commandPaths(c *command) [][]string {
	var out [][]string
	var walk func(c *command, path []string)
	walk = func(c *command, path []string) {
		out = append(out, path)
		for _, s := range c.subs {
			walk(s, append(append([]string(nil), path...), s.name[strings.LastIndexByte(s.name, ' ')+1:]))
		}
	}
	walk(c, nil)
	return out
}

// TestEveryCommandHelp: -h (and --help) of every command says what it
// does, its usage, its flags or subcommands and an example, on stdout,
// and exits 0; a group lists each subcommand with its one-line summary.
func TestEveryCommandHelp(t *testing.T) {
	r := root()
	paths := commandPaths(r)
	if len(paths) != 10 { // concurkit, bench, chaos, demo, simulate, migrate, migrate up|down|version|template
		t.Fatalf("%d commands: %q", len(paths), paths)
	}
	for _, path := range paths {
		for _, h := range []string{"-h", "--help"} {
			name := strings.TrimSpace("concurkit " + strings.Join(path, " "))
			t.Run(name+" "+h, func(t *testing.T) {
				var out, errOut bytes.Buffer
				code := mainExit(t.Context(), append(append([]string(nil), path...), h), &out, &errOut)
				if code != 0 || errOut.Len() != 0 {
					t.Fatalf("exit %d, stderr %q", code, errOut.String())
				}
				help := out.String()
				for _, want := range []string{name + ": ", "Usage:\n  " + name + " ", "Example:\n  " + name} {
					if !strings.Contains(help, want) {
						t.Errorf("help lacks %q:\n%s", want, help)
					}
				}
				c := find(r, path)
				if len(c.subs) > 0 {
					for _, s := range c.subs {
						short := s.name[strings.LastIndexByte(s.name, ' ')+1:]
						if !strings.Contains(help, "  "+short+" ") || !strings.Contains(help, s.summary) {
							t.Errorf("group help does not list %q with its summary:\n%s", short, help)
						}
					}
				} else if !strings.Contains(help, "Flags:\n  -") {
					t.Errorf("help lists no flags:\n%s", help)
				}
			})
		}
	}
}

func find(c *command, path []string) *command {
	for _, p := range path {
		for _, s := range c.subs {
			if strings.HasSuffix(s.name, p) && s.name[strings.LastIndexByte(s.name, ' ')+1:] == p {
				c = s
				break
			}
		}
	}
	return c
}

// TestCommandLineErrors: a wrong command line exits 2 with a message that
// names the flag or argument at fault and points to -h; nothing runs.
func TestCommandLineErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "missing command"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"migrate"}, "concurkit migrate: missing command"},
		{[]string{"migrate", "sideways"}, `unknown command "sideways"`},
		{[]string{"demo", "--buyers", "x"}, "-buyers"},
		{[]string{"demo", "--buyers", "1"}, "--buyers: must be in [2, 1000]"},
		{[]string{"demo", "--schema", ""}, "--schema: empty name"},
		{[]string{"demo", "--schema", "a\x00b"}, "--schema"},
		{[]string{"demo", "--postgres", "", "--mysql", ""}, "--postgres and --mysql are both empty"},
		{[]string{"demo", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"simulate", "--policy", "optimistic"}, "--policy: unknown policy"},
		{[]string{"simulate", "--victim", "oldest"}, "--victim: unknown rule"},
		{[]string{"simulate", "--read-ratio", "2"}, "--read-ratio: must be in [0, 1]"},
		{[]string{"simulate", "--hot-fraction", "-0.1"}, "--hot-fraction"},
		{[]string{"simulate", "--hot", "2000", "--resources", "10"}, "--hot"},
		{[]string{"simulate", "--skew", "NaN"}, "--skew"},
		{[]string{"simulate", "--txns", "0"}, "--txns"},
		{[]string{"simulate", "--concurrency", "0"}, "--concurrency"},
		{[]string{"simulate", "--max-events", "-1"}, "--max-events"},
		{[]string{"simulate", "--max-time", "-1s"}, "--max-time"},
		{[]string{"simulate", "--trace"}, "--trace: needs --out"},
		{[]string{"simulate", "--timeout", "soon"}, "-timeout"},
		{[]string{"chaos"}, "--backend: required"},
		{[]string{"chaos", "--backend", "mysql"}, `counter backend "mysql"`},
		{[]string{"chaos", "--workload", "queue", "--backend", "redis"}, `workload "queue"`},
		{[]string{"chaos", "--backend", "redis", "--nemesis", "flood"}, `nemesis "flood"`},
		{[]string{"chaos", "--backend", "redis", "--options", "isolation"}, "--options: \"isolation\" is not key=value"},
		{[]string{"chaos", "--backend", "redis", "--workers", "-2"}, "negative workers"},
		{[]string{"chaos", "--backend", "redis", "--server", "redis"}, "want NAME=PIDFILE"},
		{[]string{"migrate", "up"}, "--dialect: required"},
		{[]string{"migrate", "up", "--dialect", "oracle", "--dsn", "x"}, `--dialect: unknown dialect "oracle"`},
		{[]string{"migrate", "version", "--dialect", "postgres"}, "--dsn: required"},
		{[]string{"migrate", "down", "--dialect", "postgres", "--dsn", "mysql://x"}, "--dsn: "},
		{[]string{"migrate", "template", "--table", "t", "--version-column"}, "--dialect: required"},
		{[]string{"migrate", "template", "--dialect", "postgres"}, "nothing to generate"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--version-column"}, "--table: required"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--table", "t", "--fence-table"}, "--table: given without"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--table", "a..b", "--version-column"}, "--table"},
		{[]string{"migrate", "template", "--dialect", "mysql", "--table", "t", "--version-column=" + strings.Repeat("x", 65)}, "--version-column"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--table", "t", "--version-column", "--fencing-column=version"}, "--version-column and --fencing-column"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table=a..b"}, "--fence-table"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--sequence", "--sequence"}, "--sequence"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--sequence="}, "-sequence"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table", "--version", "x"}, "--version: must be a positive integer"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table", "--version", "1", "--numbering", "timestamp"}, "--version: cannot be combined"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table", "--numbering", "random"}, "--numbering: must be timestamp or sequential"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table", "--numbering", "sequential"}, "--numbering: sequential needs --out"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table", "--lock-timeout", "0s"}, "--lock-timeout: must be positive"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table", "--lock-timeout", "48h"}, "--lock-timeout"},
		{[]string{"migrate", "template", "--dialect", "postgres", "--fence-table", "--title", "!!"}, "--title"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := mainExit(t.Context(), tc.args, &out, &errOut)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) || !strings.Contains(errOut.String(), " -h' for usage") {
				t.Fatalf("stderr lacks %q and the -h hint:\n%s", tc.want, errOut.String())
			}
		})
	}
}

// TestNothingWrittenToCurrentDirectory: without --out, simulate (even
// with deadlocks to draw and a sweep to plot) and migrate template write
// no file; they print instead.
func TestNothingWrittenToCurrentDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"simulate", "--compare", "--txns", "200", "--resources", "20"},
		{"migrate", "template", "--dialect", "postgres", "--table", "orders", "--version-column", "--fencing-column"},
		{"migrate", "template", "--dialect", "mysql", "--fence-table", "--sequence"},
	} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), args, &out, &errOut); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, errOut.String())
		}
		if args[0] == "simulate" && !strings.Contains(out.String(), "first deadlock") {
			t.Errorf("%q printed no deadlock (the test needs one):\n%s", args, out.String())
		}
		if args[0] == "migrate" && !strings.Contains(out.String(), ".up.sql\n") {
			t.Errorf("%q printed no migration:\n%s", args, out.String())
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 0 {
			t.Fatalf("%q wrote into the current directory: %v %v", args, entries, err)
		}
	}
}

// TestDemoHelpHidesEnvPassword: demo's flags default to the environment's
// URLs, but -h never shows them (nor their passwords).
func TestDemoHelpHidesEnvPassword(t *testing.T) {
	t.Setenv(envPostgres, "postgres://alice:s3cretpw@db.example:5432/app")
	t.Setenv(envMySQL, "bob:an0therpw@tcp(db.example:3306)/app")
	var out, errOut bytes.Buffer
	if code := mainExit(t.Context(), []string{"demo", "-h"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	all := out.String() + errOut.String()
	for _, secret := range []string{"s3cretpw", "an0therpw", "db.example"} {
		if strings.Contains(all, secret) {
			t.Fatalf("demo -h shows %q:\n%s", secret, all)
		}
	}
	if !strings.Contains(all, "$"+envPostgres) {
		t.Errorf("demo -h does not say where --postgres defaults from:\n%s", all)
	}
}

// TestMigrateUpVersionDown: migrate up names every object it creates and
// the history table, migrate version reports it, migrate down drops them;
// on both servers.
func TestMigrateUpVersionDown(t *testing.T) {
	for _, tc := range []struct {
		dialect migrations.Dialect
		dsn     string
	}{
		{migrations.Postgres, testkit.PostgresURL(t)},
		{migrations.MySQL, testkit.MySQLDSN(t)},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			objs, err := migrations.Objects(tc.dialect)
			if err != nil {
				t.Fatal(err)
			}
			// The toolkit set grows version by version (and the dialects
			// need not ship the same versions).
			latest, err := latestVersion(tc.dialect)
			if err != nil {
				t.Fatal(err)
			}
			of := fmt.Sprintf(" of %d", latest)
			for _, step := range []struct {
				verb string
				want []string
			}{
				{"version", []string{"version 0" + of + " in " + migrations.HistoryTable}},
				{"up", []string{"creating, if missing", migrations.HistoryTable, fmt.Sprintf("version %d%s", latest, of)}},
				{"version", []string{fmt.Sprintf("version %d%s", latest, of)}},
				{"down", []string{"dropping", "version 0" + of}},
			} {
				var out, errOut bytes.Buffer
				if code := mainExit(t.Context(), []string{"migrate", step.verb, "--dialect", string(tc.dialect), "--dsn", tc.dsn}, &out, &errOut); code != 0 {
					t.Fatalf("migrate %s: exit %d: %s", step.verb, code, errOut.String())
				}
				want := step.want
				if step.verb != "version" {
					for _, o := range objs {
						want = append(want, o.Name, o.Use)
					}
				}
				for _, w := range want {
					if !strings.Contains(out.String(), w) {
						t.Errorf("migrate %s: output lacks %q:\n%s", step.verb, w, out.String())
					}
				}
			}
		})
	}
}

// TestBinaryExitCodes runs the built command: -h exits 0, a bad flag 2
// with the flag named on stderr, a failing command 1.
func TestBinaryExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "concurkit")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"-h"}, 0, "Commands:", ""},
		{[]string{"migrate", "template", "-h"}, 0, "Example:", ""},
		{[]string{"demo", "--buyers", "x"}, 2, "", "-buyers"},
		{[]string{"migrate", "up", "--dialect", "postgres"}, 2, "", "--dsn: required"},
		{[]string{"migrate", "version", "--dialect", "postgres", "--dsn", "postgres://127.0.0.1:1/x?connect_timeout=5"}, 1, "", "migrations: connect"},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Dir = t.TempDir()
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("concurkit %q: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, out.String(), errOut.String())
		}
	}
}
