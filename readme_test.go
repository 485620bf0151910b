package concurkit_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeCode: every Go block of the README is an excerpt of a test file
// of the module (mostly Examples, which run against the test servers), so
// the README's code compiles and works. Indentation is ignored.
func TestReadmeCode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 300 {
		t.Errorf("README.md has %d lines: keep it under 300 (details belong in package docs)", n)
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
