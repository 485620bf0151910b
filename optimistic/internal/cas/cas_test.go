package cas

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
)

var tbl = optimistic.Table{Name: "t"}

// TestKeyOfIsInjective: inputs that would collide in a plain join (no
// columns vs one empty name; a NUL inside a name vs the separator) get
// different keys.
func TestKeyOfIsInjective(t *testing.T) {
	pairs := [][2][]string{
		{nil, {""}},
		{{"a"}, {"a", ""}},
		{{"a", "b"}, {"a\x00b"}},
		{{"", "a"}, {"\x00a"}},
	}
	for _, p := range pairs {
		if KeyOf(tbl, p[0]) == KeyOf(tbl, p[1]) {
			t.Errorf("KeyOf(%q) == KeyOf(%q)", p[0], p[1])
		}
	}
}

// valid reports whether every column is a name the adapters accept
// (validation happens only on a cache miss).
func valid(cols []string) bool {
	for _, c := range cols {
		if ident.Validate(c) != nil {
			return false
		}
	}
	return true
}

// FuzzCacheKey: the cache is consulted before validation, so bad input
// must never share a key with a valid shape (which is all the cache
// holds): two sorted column lists with equal keys where one is valid are
// the same list.
func FuzzCacheKey(f *testing.F) {
	f.Add("a", "b", "a\x00b", "")
	f.Add("", "", "", "")
	f.Add("x", "", "x\x00", "")
	f.Fuzz(func(t *testing.T, a1, a2, b1, b2 string) {
		for _, a := range [][]string{{a1}, {a1, a2}} {
			for _, b := range [][]string{{b1}, {b1, b2}, nil} {
				a, b := slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
				if KeyOf(tbl, a) == KeyOf(tbl, b) && valid(a) && !slices.Equal(a, b) {
					t.Fatalf("valid %q and %q share a cache key", a, b)
				}
			}
		}
	})
}

func TestCacheIsBounded(t *testing.T) {
	var c Cache[int]
	for i := range MaxCached + 10 {
		c.Store(KeyOf(tbl, []string{strings.Repeat("c", i+1)}), i)
	}
	if n := c.Len(); n != MaxCached {
		t.Fatalf("cache holds %d entries; want the bound %d", n, MaxCached)
	}
	if v, ok := c.Load(KeyOf(tbl, []string{"c"})); !ok || v != 0 {
		t.Fatalf("first entry = %d, %v; want 0, true", v, ok)
	}
}

// TestConflict: the event carries the adapter's package and the table
// (schema-qualified when set); without hooks the conflict path allocates
// nothing.
func TestConflict(t *testing.T) {
	var got []observe.ConflictEvent
	ctx := observe.WithHooks(t.Context(), &observe.Hooks{
		Conflict: func(_ context.Context, e observe.ConflictEvent) { got = append(got, e) },
	})
	err := Conflict(ctx, "optimisticpg", optimistic.Table{Schema: "app", Name: "accounts"})
	if !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("Conflict = %v; want ErrConflict", err)
	}
	want := []observe.ConflictEvent{{Package: "optimisticpg", Table: "app.accounts"}}
	if !slices.Equal(got, want) {
		t.Fatalf("events %+v; want %+v", got, want)
	}
	bare := context.Background()
	if n := testing.AllocsPerRun(100, func() { _ = Conflict(bare, "optimisticpg", optimistic.Table{Schema: "app", Name: "accounts"}) }); n != 0 {
		t.Fatalf("Conflict without hooks allocates %v times; want 0", n)
	}
}
