package concurkit_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/migrations"
)

// TestReadmeCode: every Go block of the README is an excerpt of a test file
// of the module (mostly Examples, which run against the test servers), so
// the README's code compiles and works. Indentation is ignored.
func TestReadmeCode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 345 {
		t.Errorf("README.md has %d lines: keep it under 345 (details belong in package docs)", n)
	}
	var tests []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		tests = append(tests, normalize(string(b)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) < 5 {
		t.Fatalf("found %d Go blocks in README.md", len(blocks))
	}
	for _, b := range blocks {
		want := normalize(b)
		found := false
		for _, src := range tests {
			if strings.Contains(src, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("README block is not an excerpt of any test file (copy it from an Example):\n%s", b)
		}
	}
}

// readmeUserTables are the reader's own tables that the README's snippets
// assume (the examples create them): every other object a snippet names
// must be one that migrations.Up creates.
var readmeUserTables = []string{"accounts", "inventory", "payments", "totals"}

// Patterns that name a database object in a README Go block.
var (
	// A sequence or table name given as a string literal to a
	// constructor: NewSequence(pool, "x"), CreateSequence(ctx, db, "x"),
	// LockRows(ctx, tx, "x", …), ClaimJobs(ctx, tx, "x", …).
	readmeObjectArgs = regexp.MustCompile(`(?:NewSequence|CreateSequence|LockRows|ClaimJobs)\(([^)]*)\)`)
	readmeLiteral    = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	// A table in a Table or Fence literal: Table{Name: "x"}.
	readmeNameField = regexp.MustCompile(`Name:\s*"([^"]+)"`)
	// A table in SQL text: FROM x, INTO x, UPDATE x, JOIN x.
	readmeSQLTable = regexp.MustCompile(`(?i)\b(?:FROM|INTO|UPDATE|JOIN)\s+([A-Za-z_][A-Za-z0-9_.]*)`)
)

// TestReadmeObjectsExist: every database object a README snippet names —
// a sequence or table given to a constructor, a Table's Name, a table in
// SQL text — is one that migrations.Up creates (migrations.Objects) or one
// of readmeUserTables. A snippet copied from an Example that created its
// own object fails after migrations.Up (the README once showed
// fencedpg.NewSequence(pool, "example_redis_tokens"): relation does not
// exist).
func TestReadmeObjectsExist(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range readmeUserTables {
		known[n] = true
	}
	for _, d := range []migrations.Dialect{migrations.Postgres, migrations.MySQL} {
		objs, err := migrations.Objects(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			known[o.Name] = true
		}
	}
	named := 0
	for _, b := range goBlocks(string(readme)) {
		var names []string
		for _, call := range readmeObjectArgs.FindAllStringSubmatch(b, -1) {
			// The first string literal of the call is the object (a lock
			// column or key comes after it).
			if lit := readmeLiteral.FindStringSubmatch(call[1]); lit != nil {
				names = append(names, lit[1])
			}
		}
		for _, m := range readmeNameField.FindAllStringSubmatch(b, -1) {
			names = append(names, m[1])
		}
		for _, lit := range readmeLiteral.FindAllStringSubmatch(b, -1) {
			for _, m := range readmeSQLTable.FindAllStringSubmatch(lit[1], -1) {
				names = append(names, m[1][strings.LastIndex(m[1], ".")+1:])
			}
		}
		for _, n := range names {
			named++
			if !known[n] {
				t.Errorf("README names %q, which neither migrations.Up creates nor readmeUserTables lists:\n%s", n, b)
			}
		}
	}
	if named < 5 {
		t.Errorf("found %d object names in the README's Go blocks: the patterns no longer match", named)
	}
}

// TestReadmeFencedReads: a README snippet that writes with a fenced
// Update and computes the value from the row reads it in the write's
// transaction with FOR UPDATE (see TestFencedReadModifyWrite): the
// snippet people extend must not be one that loses updates when extended.
func TestReadmeFencedReads(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range goBlocks(string(readme)) {
		if !strings.Contains(b, "fencedpg.Update(") && !strings.Contains(b, "fencedmysql.Update(") {
			continue
		}
		found = true
		if !strings.Contains(b, "FOR UPDATE") || !strings.Contains(b, "Update(ctx, tx,") {
			t.Errorf("README's fenced write does not read the row FOR UPDATE in its own transaction:\n%s", b)
		}
	}
	if !found {
		t.Error("README has no fenced Update snippet")
	}
}

// goBlocks returns the bodies of the ```go fenced blocks of a Markdown text.
func goBlocks(md string) []string {
	var out []string
	for {
		i := strings.Index(md, "```go\n")
		if i < 0 {
			return out
		}
		md = md[i+len("```go\n"):]
		j := strings.Index(md, "```")
		if j < 0 {
			return out
		}
		out = append(out, md[:j])
		md = md[j+3:]
	}
}

// normalize trims every line and drops empty ones, joined by newlines with
// a leading and trailing newline, so that a block matches whole lines only.
func normalize(s string) string {
	var b strings.Builder
	b.WriteString("\n")
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	return b.String()
}
