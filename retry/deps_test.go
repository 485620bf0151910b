package retry_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDependencies: retry links nothing outside the standard library and
// the module's own stdlib-only packages (the issue: it used to link the
// MySQL driver).
func TestDependencies(t *testing.T) {
	for _, p := range nonStandardDeps(t, ".") {
		if !strings.HasPrefix(p, "github.com/concurkit/concurkit") {
			t.Errorf("retry depends on %s", p)
		}
		for _, bad := range []string{"/pessimistic", "/optimistic", "/fenced", "/distlock", "/internal/mysqlerr", "/internal/pgxdb", "/internal/sqldb", "/internal/ident"} {
			if strings.Contains(p, bad) {
				t.Errorf("retry depends on %s, which is (or may become) driver-specific", p)
			}
		}
	}
}

// nonStandardDeps lists the packages outside the standard library that pkg
// (a path relative to the test's directory) links.
func nonStandardDeps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
