package migrations_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDriverNotLinked: a program that links neither migrationspg nor
// migrationsmysql gets ErrDriverNotLinked, naming the package to import,
// before any connection — not golang-migrate's "unknown driver".
func TestDriverNotLinked(t *testing.T) {
	out, err := exec.Command("go", "run", "./internal/unlinked").CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"migrations/migrationspg", "migrations/migrationsmysql"}
	if len(lines) != 2 {
		t.Fatalf("output %q", out)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "true ") || !strings.Contains(l, want[i]) {
			t.Errorf("dialect %d: %q; want ErrDriverNotLinked naming %s", i, l, want[i])
		}
	}
}
