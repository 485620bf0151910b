package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/testkit"
)

// TestChaosBinary runs a short fenced-counter chaos run through the built
// binary: the run starts the binary again as its client processes, which
// is what a user's `concurkit chaos` does.
func TestChaosBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	pg, redis := testkit.PostgresServerURL(t), testkit.RedisAddr(t)
	bin := filepath.Join(t.TempDir(), "concurkit")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := t.TempDir()
	cmd := exec.Command(bin, "chaos", "--backend", "redis", "--duration", "3s", "--ttl", "300ms", "--seed", "5", "--out", out)
	cmd.Env = append(os.Environ(), "CONCURKIT_POSTGRES_URL="+pg, "CONCURKIT_REDIS_ADDR="+redis)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("concurkit chaos: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"seed 5", "incr/ok", "verdict:    VALID"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, f := range []string{"history.jsonl", "faults.jsonl", "report.json", "summary.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}
