package fenced_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/concurkit/concurkit"

// TestDependencies: dependencies follow use. The core and its internal
// helper link nothing outside the standard library and the module; each
// adapter links its own driver family and no other.
func TestDependencies(t *testing.T) {
	for _, c := range []struct {
		pkg    string
		forbid []string // import path prefixes; "" = anything outside std and the module
	}{
		{"fenced", []string{""}},
		{"fenced/internal/guard", []string{""}},
		{"fenced/fencedpg", []string{"github.com/aws/", "github.com/go-sql-driver/"}},
		{"fenced/fencedmysql", []string{"github.com/aws/", "github.com/jackc/"}},
		{"fenced/fenceddynamo", []string{"github.com/jackc/", "github.com/go-sql-driver/"}},
	} {
		t.Run(c.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"/"+c.pkg).Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			deps := strings.Fields(string(out))
			var external int
			for _, d := range deps {
				inModule := d == module || strings.HasPrefix(d, module+"/")
				if !inModule {
					external++
				}
				for _, f := range c.forbid {
					if (f == "" && !inModule) || (f != "" && strings.HasPrefix(d, f)) {
						t.Errorf("%s links %s", c.pkg, d)
					}
				}
			}
			t.Logf("%s: %d non-standard packages outside the module", c.pkg, external)
		})
	}
}
