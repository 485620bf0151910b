package optimistic

import (
	"errors"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/internal/ident"
)

// skeleton replaces every quoted identifier in stmt (quote character q,
// doubled inside) by a bare q q pair. It reports false if a quote is left
// open. Two statements with the same skeleton differ only inside quoted
// identifiers: caller-supplied names cannot change the SQL around them.
func skeleton(stmt string, q byte) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(stmt); i++ {
		if stmt[i] != q {
			b.WriteByte(stmt[i])
			continue
		}
		for i++; ; i++ {
			if i >= len(stmt) {
				return "", false
			}
			if stmt[i] == q {
				if i+1 < len(stmt) && stmt[i+1] == q {
					i++
					continue
				}
				break
			}
		}
		b.WriteByte(q)
		b.WriteByte(q)
	}
	return b.String(), true
}

// fuzzStatement checks, for one dialect, that any names either fail with
// ErrInvalidArgument or produce a statement whose skeleton equals the one
// built from plain names.
func fuzzStatement(t *testing.T, quote func(...string) (string, error), build func(quoted) string, q byte, schema, table, key, version, col string) {
	tbl := Table{Schema: schema, Name: table, Key: key, Version: version}
	set := map[string]any{col: 1}
	cols, err := tbl.validate(struct{}{}, 1, set)
	if err == nil {
		var qd quoted
		qd, err = tbl.quote(quote, cols)
		if err == nil {
			plainTbl := Table{Name: "t", Key: "k", Version: "v"}
			if schema != "" {
				plainTbl.Schema = "s"
			}
			plain, _ := plainTbl.quote(quote, []string{"c"})
			got, ok := skeleton(build(qd), q)
			want, _ := skeleton(build(plain), q)
			if !ok || got != want {
				t.Fatalf("names %q changed the statement:\n%s\nskeleton %q\nwant     %q", []string{schema, table, key, version, col}, build(qd), got, want)
			}
			return
		}
	}
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
	}
}

var fuzzNames = [][5]string{
	{"", "inventory", "id", "version", "stock"},
	{"app", `we"ird`, "k`ey", `"; DROP TABLE x; --`, "$1"},
	{"", "t", "id", "id", "c"},
	{"", "", "id", "v", "c"},
	{"s\x00", "t", "k", "v", "c"},
}

func FuzzPostgresStatement(f *testing.F) {
	for _, n := range fuzzNames {
		f.Add(n[0], n[1], n[2], n[3], n[4])
	}
	f.Fuzz(func(t *testing.T, schema, table, key, version, col string) {
		fuzzStatement(t, ident.Postgres, pgStatement, '"', schema, table, key, version, col)
	})
}

func FuzzMySQLStatement(f *testing.F) {
	for _, n := range fuzzNames {
		f.Add(n[0], n[1], n[2], n[3], n[4])
	}
	f.Fuzz(func(t *testing.T, schema, table, key, version, col string) {
		fuzzStatement(t, ident.MySQL, myStatement, '`', schema, table, key, version, col)
	})
}
