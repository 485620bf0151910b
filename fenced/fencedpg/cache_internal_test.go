package fencedpg

import (
	"testing"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
)

// BenchmarkStatement: a statement from the cache against building and
// quoting it on every call (what every call did before the cache).
func BenchmarkStatement(b *testing.B) {
	t := fenced.Table{Name: "accounts", VersionColumn: "version"}
	set := map[string]any{"owner": "x", "amount": 1}
	b.Run("cached", func(b *testing.B) {
		var c guard.Cache
		for b.Loop() {
			if _, err := c.Get(t, set, buildUpdate); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("built", func(b *testing.B) {
		for b.Loop() {
			if _, err := buildUpdate(t, []string{"amount", "owner"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCacheKeepsShapesApart: the same table with other columns, another
// version column or schema gets its own statement.
func TestCacheKeepsShapesApart(t *testing.T) {
	var c guard.Cache
	base := fenced.Table{Name: "accounts"}
	get := func(t2 fenced.Table, set map[string]any) string {
		s, err := c.Get(t2, set, buildUpdate)
		if err != nil {
			t.Fatal(err)
		}
		return s.SQL
	}
	shapes := map[string]bool{}
	for _, s := range []string{
		get(base, nil),
		get(base, map[string]any{"a": 1}),
		get(base, map[string]any{"b": 1}),
		get(base, map[string]any{"a": 1, "b": 2}),
		get(fenced.Table{Name: "accounts", VersionColumn: "v"}, map[string]any{"a": 1}),
		get(fenced.Table{Schema: "s", Name: "accounts"}, map[string]any{"a": 1}),
		get(fenced.Table{Name: "accounts", TokenColumn: "tok"}, map[string]any{"a": 1}),
	} {
		if shapes[s] {
			t.Fatalf("two shapes share the statement %s", s)
		}
		shapes[s] = true
	}
	if got := get(base, map[string]any{"b": 1, "a": 2}); got != get(base, map[string]any{"a": 1, "b": 2}) {
		t.Fatal("map order changed the statement")
	}
	if c.Len() != len(shapes) {
		t.Fatalf("cache holds %d statements, want %d", c.Len(), len(shapes))
	}
	for i := range guard.MaxCached + 10 {
		get(base, map[string]any{string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)): 1})
	}
	if c.Len() > guard.MaxCached {
		t.Fatalf("cache holds %d statements, more than MaxCached %d", c.Len(), guard.MaxCached)
	}
}
