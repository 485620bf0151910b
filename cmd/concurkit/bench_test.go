package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/testkit"
)

func TestBenchHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), []string{"bench", h}, &out, &errOut); err != nil {
			t.Fatalf("bench %s: %v", h, err)
		}
		for _, want := range []string{"Usage:\n  concurkit bench", "Example:", "-postgres-url", "-baseline", "-grid"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("bench %s: stdout lacks %q", h, want)
			}
		}
	}
}

func TestBenchFlagErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rows", "x"}, "--rows"},
		{[]string{"--workers", "4,x"}, "--workers"},
		{[]string{"--db", "oracle"}, "--db"},
		{[]string{"--rate", "fast"}, "--rate"},
		{[]string{"--slo", "p99"}, "--slo"},
		{[]string{"--slo", "p100=5ms"}, "--slo"},
		{[]string{"--zipf", "hot"}, "--zipf"},
		{[]string{"--fast", "--grid", "full"}, "--grid"},
		{[]string{"--baseline", "/nonexistent/summary.json"}, "--baseline"},
		{[]string{"--duration", "soon"}, "-duration"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		var out, errOut bytes.Buffer
		err := run(t.Context(), append([]string{"bench"}, c.args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error()+errOut.String(), c.want) {
			t.Errorf("bench %v: err %v, stderr %q: want a message naming %s", c.args, err, errOut.String(), c.want)
		}
		if errors.Is(err, flag.ErrHelp) {
			t.Errorf("bench %v: ErrHelp", c.args)
		}
	}
}

func TestBenchList(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"bench", "--list"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "lossy") || !strings.Contains(out.String(), "hidden") || !strings.Contains(out.String(), "for-no-key-update") {
		t.Errorf("--list:\n%s", out.String())
	}
}

// TestBenchCLI runs a tiny grid through the command, then again against the
// first run's summary as a baseline.
func TestBenchCLI(t *testing.T) {
	pgURL := testkit.PostgresServerURL(t)
	schema := testkit.Name("ck_bench_cli_")
	dir := t.TempDir()
	args := []string{"bench", "--fast", "--db", "postgres", "--postgres-url", pgURL, "--schema", schema,
		"--strategies", "for-update,lossy", "--rows", "1", "--workers", "4", "--rate", "none",
		"--duration", "150ms", "--sync-probe=-1s", "--quiet"}
	var out, errOut bytes.Buffer
	if err := run(t.Context(), append(args, "--out", filepath.Join(dir, "a")), &out, &errOut); err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"ops/s", "for-update", "PASSED", "lossy", "FAILED", "Verdict postgres / counter", "wrote results.csv, results.md, summary.json, 2 hlog files"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{"summary.json", "results.csv", "results.md"} {
		if _, err := os.Stat(filepath.Join(dir, "a", f)); err != nil {
			t.Error(err)
		}
	}
	out.Reset()
	base := filepath.Join(dir, "a", "summary.json")
	if err := run(t.Context(), append(args, "--out", filepath.Join(dir, "b"), "--baseline", base), &out, &errOut); err != nil {
		t.Fatalf("bench --baseline: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Against baseline") || !strings.Contains(out.String(), "2 cells compared") {
		t.Errorf("baseline comparison missing:\n%s", out.String())
	}
}
