package pessimistic_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDependencies: dependencies follow use. The core links nothing
// outside the standard library (and concurkit's stdlib-only packages); the
// PostgreSQL adapter links no MySQL driver or AWS SDK; the MySQL adapter
// links no pgx or AWS SDK.
func TestDependencies(t *testing.T) {
	for _, tc := range []struct {
		pkg       string
		forbidden []string // prefixes
		stdOnly   bool
	}{
		{pkg: ".", stdOnly: true},
		{pkg: "./internal/txn", stdOnly: true},
		{pkg: "./pessimisticpg", forbidden: []string{"github.com/aws/", "github.com/go-sql-driver/mysql", "github.com/concurkit/concurkit/internal/mysql"}},
		{pkg: "./pessimisticmysql", forbidden: []string{"github.com/aws/", "github.com/jackc/", "github.com/concurkit/concurkit/internal/pgxdb"}},
	} {
		deps := nonStandardDeps(t, tc.pkg)
		t.Logf("%s: %d packages outside the standard library", tc.pkg, len(deps))
		for _, p := range deps {
			if tc.stdOnly && !strings.HasPrefix(p, "github.com/concurkit/concurkit") {
				t.Errorf("%s depends on %s", tc.pkg, p)
			}
			for _, f := range tc.forbidden {
				if strings.HasPrefix(p, f) {
					t.Errorf("%s depends on %s", tc.pkg, p)
				}
			}
		}
		if tc.stdOnly {
			// The module's own packages it links must be stdlib-only too:
			// none of them may be an adapter or a driver's internal package.
			for _, p := range deps {
				for _, bad := range []string{"pessimisticpg", "pessimisticmysql", "/internal/pgxdb", "/internal/sqldb", "/internal/mysqlerr", "/internal/ident", "/internal/mysqlcancel", "/internal/dynamoapi"} {
					if strings.HasSuffix(p, bad) {
						t.Errorf("%s depends on %s", tc.pkg, p)
					}
				}
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
