package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulateCompare(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	err := runSimulate(t.Context(), []string{"--compare", "--trace", "--txns", "300", "--resources", "50", "--out", dir}, &out, &errb)
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
	if err := runSimulate(t.Context(), []string{"--sweep", "--out", dir}, &out, &errb); err != nil {
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
	} {
		var out, errb bytes.Buffer
		if err := runSimulate(t.Context(), append(args, "--out", t.TempDir()), &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
