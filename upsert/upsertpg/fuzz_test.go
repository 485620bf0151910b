package upsertpg

import (
	"errors"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/internal/spec"
)

// fuzzNames are the seeds: plain names, names full of quotes and SQL, a
// column equal to the key, an empty table, a NUL.
var fuzzNames = [][5]string{
	{"", "profiles", "id", "name", "visits"},
	{"app", `we"ird`, "k`ey", `"; DROP TABLE x; --`, "$1"},
	{"", "t", "id", "id", "id"},
	{"", "", "id", "v", "c"},
	{"s\x00", "t", "k", "v", "c"},
}

// FuzzPostgresStatements checks that any names either fail with an error matching
// concurkit.ErrInvalidArgument or build statements whose skeletons
// (ident.Skeleton) equal those built from plain names in the same
// positions: caller-supplied names cannot change the SQL around them.
func FuzzPostgresStatements(f *testing.F) {
	for _, n := range fuzzNames {
		f.Add(n[0], n[1], n[2], n[3], n[4])
	}
	const q = '"'
	statements := func(q spec.Quoted, keyIndex int) []string {
		return []string{insertStatement(q), upsertStatement(q), insertOrGetStatement(q, keyIndex)}
	}
	f.Fuzz(func(t *testing.T, schema, table, key, col, ret string) {
		tbl := upsert.Table{Schema: schema, Name: table, KeyColumn: key}
		var dst int
		keyName := key // "" means the default key column
		if keyName == "" {
			keyName = upsert.DefaultKeyColumn
		}
		row := map[string]any{keyName: 1, col: 2}
		s, err := spec.Validate(pkg, struct{}{}, "db", tbl, row, []string{ret}, []any{&dst})
		if err == nil {
			var qd spec.Quoted
			if qd, err = s.Quote(pkg, ident.Postgres); err == nil {
				// The same shape with plain names: key sorts where key sorted.
				plainKey, plainCol := "k", "c"
				if len(s.Cols) == 2 && s.KeyIndex == 0 {
					plainKey, plainCol = "a", "b"
				}
				plainRow := map[string]any{plainKey: 1}
				if len(s.Cols) == 2 {
					plainRow[plainCol] = 2
				}
				plainTbl := upsert.Table{Name: "t", KeyColumn: plainKey}
				if schema != "" {
					plainTbl.Schema = "s"
				}
				ps, _ := spec.Validate(pkg, struct{}{}, "db", plainTbl, plainRow, []string{"r"}, []any{&dst})
				pq, _ := ps.Quote(pkg, ident.Postgres)
				got, want := statements(qd, s.KeyIndex), statements(pq, ps.KeyIndex)
				for i := range got {
					g, ok := ident.Skeleton(got[i], q)
					w, _ := ident.Skeleton(want[i], q)
					if !ok || g != w {
						t.Fatalf("names %q changed statement %d:\n%s\nskeleton %q\nwant     %q", []string{schema, table, key, col, ret}, i, got[i], g, w)
					}
				}
				return
			}
		}
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Fatalf("error %v does not match concurkit.ErrInvalidArgument", err)
		}
	})
}
