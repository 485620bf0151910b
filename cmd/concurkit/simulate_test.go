package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/deadlock"
)

func TestSimulateCompare(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"simulate", "--compare", "--trace", "--txns", "300", "--resources", "50", "--out", dir}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{"detect-periodic", "wound-wait", "no-wait", "every committed history is conflict-serializable"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{"waitfor-detect.dot", "trace-detect.txt", "trace-no-wait.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestSimulateSweep(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"simulate", "--sweep", "--out", dir}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, f := range []string{"sweep.md", "sweep.png", "sweep-aborts.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSimulateBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--policy", "optimistic"},
		{"--victim", "oldest"},
		{"--read-ratio", "2"},
		{"extra"},
		{"--max-events", "-1"},
		{"--max-time", "-1s"},
		{"--max-restart-delay", "-1ms"},
	} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), append(append([]string{"simulate"}, args...), "--out", t.TempDir()), &out, &errb); exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want a usage error (exit 2)", args, err)
		}
	}
}

// TestSimulateIssueConfig is the command of the report "simulate --policy
// timeout --hot 10 never ends": after 1,995 commits the last 5 transactions
// aborted each other on the hot rows forever. It now completes, well
// within a bound on events that turns a run that never ends into a failure.
func TestSimulateIssueConfig(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"simulate", "--policy", "timeout", "--hot", "10", "--txns", "2000", "--max-events", "2000000", "--out", t.TempDir()}
	if err := run(t.Context(), args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "  timeout       2000 ") || !strings.Contains(out.String(), "conflict-serializable") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestSimulateLimitFlags: --max-events and --max-time stop a thrashing run
// (restart delays kept from growing) with deadlock.ErrLimit, after printing
// what it did.
func TestSimulateLimitFlags(t *testing.T) {
	for _, limit := range [][]string{{"--max-events", "10000"}, {"--max-time", "100ms"}} {
		var out, errb bytes.Buffer
		args := append([]string{"simulate", "--policy", "timeout", "--hot", "10", "--txns", "2000", "--max-restart-delay", "200us", "--out", t.TempDir()}, limit...)
		err := run(t.Context(), args, &out, &errb)
		if !errors.Is(err, deadlock.ErrLimit) || !strings.Contains(err.Error(), "raise --max-events or --max-time") {
			t.Fatalf("%v: err = %v", limit, err)
		}
		if !strings.Contains(out.String(), "lock requests") || !strings.Contains(out.String(), "  timeout ") {
			t.Errorf("%v: output:\n%s", limit, out.String())
		}
		t.Logf("%v: %v", limit, err)
	}
}
