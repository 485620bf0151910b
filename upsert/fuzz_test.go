package upsert

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

// statements builds every statement of one dialect for q.
func statements(dialect byte, q quoted, keyIndex int) []string {
	if dialect == '"' {
		return []string{pgInsertStatement(q), pgUpsertStatement(q), pgInsertOrGetStatement(q, keyIndex)}
	}
	return []string{myWriteStatement(q, false), myWriteStatement(q, true), myReadStatement(q)}
}

// fuzzStatements checks that any names either fail with ErrInvalidArgument
// or build statements whose skeletons equal those built from plain names
// in the same positions.
func fuzzStatements(t *testing.T, quote func(...string) (string, error), dialect byte, schema, table, key, col, ret string) {
	tbl := Table{Schema: schema, Name: table, Key: key}
	row := map[string]any{key: 1, col: 2}
	var dst int
	s, err := tbl.validate(struct{}{}, row, []string{ret}, []any{&dst})
	if err == nil {
		var q quoted
		if q, err = tbl.quote(quote, s); err == nil {
			// The same shape with plain names: key sorts where key sorted.
			plainKey, plainCol := "k", "c"
			if len(s.cols) == 2 && s.keyIndex == 0 {
				plainKey, plainCol = "a", "b"
			}
			plainRow := map[string]any{plainKey: 1}
			if len(s.cols) == 2 {
				plainRow[plainCol] = 2
			}
			plainTbl := Table{Name: "t", Key: plainKey}
			if schema != "" {
				plainTbl.Schema = "s"
			}
			ps, _ := plainTbl.validate(struct{}{}, plainRow, []string{"r"}, []any{&dst})
			pq, _ := plainTbl.quote(quote, ps)
			got, want := statements(dialect, q, s.keyIndex), statements(dialect, pq, ps.keyIndex)
			for i := range got {
				g, ok := skeleton(got[i], dialect)
				w, _ := skeleton(want[i], dialect)
				if !ok || g != w {
					t.Fatalf("names %q changed statement %d:\n%s\nskeleton %q\nwant     %q", []string{schema, table, key, col, ret}, i, got[i], g, w)
				}
			}
			return
		}
	}
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
	}
}

var fuzzNames = [][5]string{
	{"", "profiles", "id", "name", "visits"},
	{"app", `we"ird`, "k`ey", `"; DROP TABLE x; --`, "$1"},
	{"", "t", "id", "id", "id"},
	{"", "", "id", "v", "c"},
	{"s\x00", "t", "k", "v", "c"},
}

func FuzzPostgresStatements(f *testing.F) {
	for _, n := range fuzzNames {
		f.Add(n[0], n[1], n[2], n[3], n[4])
	}
	f.Fuzz(func(t *testing.T, schema, table, key, col, ret string) {
		fuzzStatements(t, ident.Postgres, '"', schema, table, key, col, ret)
	})
}

func FuzzMySQLStatements(f *testing.F) {
	for _, n := range fuzzNames {
		f.Add(n[0], n[1], n[2], n[3], n[4])
	}
	f.Fuzz(func(t *testing.T, schema, table, key, col, ret string) {
		fuzzStatements(t, ident.MySQL, '`', schema, table, key, col, ret)
	})
}
