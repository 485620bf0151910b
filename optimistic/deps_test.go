package optimistic_test

import (
	"os/exec"
	"strings"
	"testing"
)

// deps returns the non-standard packages pkg compiles (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestDependencies: dependencies follow use. The core compiles only
// concurkit's own stdlib-only packages; each adapter compiles its driver
// and none of the others.
func TestDependencies(t *testing.T) {
	const (
		module = "github.com/concurkit/concurkit"
		pgx    = "github.com/jackc/"
		mysql  = "github.com/go-sql-driver/mysql"
		aws    = "github.com/aws/"
	)
	for _, c := range []struct {
		pkg       string
		forbidden []string
		onlyOwn   bool
	}{
		{module + "/optimistic", nil, true},
		{module + "/optimistic/optimisticpg", []string{aws, mysql}, false},
		{module + "/optimistic/optimisticmysql", []string{aws, pgx}, false},
		{module + "/optimistic/optimisticdynamo", []string{pgx, mysql}, false},
	} {
		ds := deps(t, c.pkg)
		t.Logf("%s: %d non-standard packages", c.pkg, len(ds))
		for _, d := range ds {
			if c.onlyOwn && d != module && !strings.HasPrefix(d, module+"/") {
				t.Errorf("%s depends on %s; the core must import only the standard library and concurkit's stdlib-only packages", c.pkg, d)
			}
			for _, f := range c.forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s depends on %s", c.pkg, d)
				}
			}
		}
	}
}
