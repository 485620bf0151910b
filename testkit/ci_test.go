package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCIRunSetsCI: .ci/run sets CI=true itself, so that on any runner an
// unreachable server fails the tests instead of skipping them. `make` is
// replaced by a stub that reports what it was given.
func TestCIRunSetsCI(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	stub := t.TempDir()
	report := filepath.Join(stub, "report")
	script := "#!/bin/sh\necho \"CI=$CI args=$*\" >" + report + "\n"
	if err := os.WriteFile(filepath.Join(stub, "make"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, filepath.Join(root, ".ci", "run"))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+stub+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf(".ci/run: %v\n%s", err, out)
	}
	got, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if want := "CI=true args=test\n"; string(got) != want {
		t.Fatalf("make ran with %q, want %q", got, want)
	}
}
