package optimisticmysql

import (
	"errors"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/internal/cas"
)

// fuzzNames are the seeds: plain names, names full of quotes and SQL, a
// key equal to the version, an empty table, a NUL.
var fuzzNames = [][5]string{
	{"", "inventory", "id", "version", "stock"},
	{"app", `we"ird`, "k`ey", `"; DROP TABLE x; --`, "$1"},
	{"", "t", "id", "id", "c"},
	{"", "", "id", "v", "c"},
	{"s\x00", "t", "k", "v", "c"},
}

// FuzzMySQLStatement checks that any names either fail with an error matching
// concurkit.ErrInvalidArgument or build statements whose skeletons
// (ident.Skeleton) equal those built from plain names: caller-supplied
// names cannot change the SQL around them.
func FuzzMySQLStatement(f *testing.F) {
	for _, n := range fuzzNames {
		f.Add(n[0], n[1], n[2], n[3], n[4])
	}
	const q = '`'
	stmts := func(q cas.Quoted) []string { s := build(q); return []string{s.cas, s.exists, s.existsLocking} }
	f.Fuzz(func(t *testing.T, schema, table, key, version, col string) {
		tbl := optimistic.Table{Schema: schema, Name: table, KeyColumn: key, VersionColumn: version}
		tbl, cols, err := cas.Prepare(pkg, struct{}{}, "db", tbl, 1, map[string]any{col: 1}, nil)
		if err == nil {
			var qd cas.Quoted
			if qd, err = cas.Quote(pkg, tbl, cols, ident.MySQL); err == nil {
				plainTbl := optimistic.Table{Name: "t", KeyColumn: "k", VersionColumn: "v"}
				if schema != "" {
					plainTbl.Schema = "s"
				}
				plain, _ := cas.Quote(pkg, plainTbl, []string{"c"}, ident.MySQL)
				got, want := stmts(qd), stmts(plain)
				for i := range got {
					g, ok := ident.Skeleton(got[i], q)
					w, _ := ident.Skeleton(want[i], q)
					if !ok || g != w {
						t.Fatalf("names %q changed statement %d:\n%s\nskeleton %q\nwant     %q", []string{schema, table, key, version, col}, i, got[i], g, w)
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
