package ident

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"inventory", true},
		{"Mixed Case", true},
		{`we"ird`, true},
		{"back`tick", true},
		{"ünïcode", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"nul\x00byte", false},
		{"bad\xffutf8", false},
	}
	for _, tc := range tests {
		err := Validate(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%q) = %v, does not wrap ErrInvalid", tc.name, err)
		}
	}
}

func TestQuote(t *testing.T) {
	tests := []struct {
		parts        []string
		pg, my       string
		pgErr, myErr bool
	}{
		{parts: []string{"jobs"}, pg: `"jobs"`, my: "`jobs`"},
		{parts: []string{"app", "jobs"}, pg: `"app"."jobs"`, my: "`app`.`jobs`"},
		{parts: []string{`a"b`}, pg: `"a""b"`, my: "`a\"b`"},
		{parts: []string{"a`b"}, pg: "\"a`b\"", my: "`a``b`"},
		{parts: []string{"x; DROP TABLE t; --"}, pg: `"x; DROP TABLE t; --"`, my: "`x; DROP TABLE t; --`"},
		{parts: []string{strings.Repeat("a", 64)}, pgErr: true, my: "`" + strings.Repeat("a", 64) + "`"},
		{parts: []string{strings.Repeat("a", 65)}, pgErr: true, myErr: true},
		{parts: []string{"trailing "}, pg: `"trailing "`, myErr: true},
		{parts: []string{"emoji😀"}, pg: `"emoji😀"`, myErr: true},
		{parts: nil, pgErr: true, myErr: true},
		{parts: []string{"app", ""}, pgErr: true, myErr: true},
		{parts: []string{"a\x00"}, pgErr: true, myErr: true},
	}
	for _, tc := range tests {
		pg, err := Postgres(tc.parts...)
		if tc.pgErr {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Postgres(%q) = %q, %v; want ErrInvalid", tc.parts, pg, err)
			}
		} else if err != nil || pg != tc.pg {
			t.Errorf("Postgres(%q) = %q, %v; want %q", tc.parts, pg, err, tc.pg)
		}
		my, err := MySQL(tc.parts...)
		if tc.myErr {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("MySQL(%q) = %q, %v; want ErrInvalid", tc.parts, my, err)
			}
		} else if err != nil || my != tc.my {
			t.Errorf("MySQL(%q) = %q, %v; want %q", tc.parts, my, err, tc.my)
		}
	}
}

// unquote parses a dotted list of quoted identifiers the way the server's
// lexer does: every part opens and closes with q, a doubled q inside is one
// literal q, and nothing but a single dot may appear between parts. Any
// byte outside the quotes other than those dots is a parse error, so a
// successful parse proves no input escaped the quotes.
func unquote(s string, q byte) ([]string, bool) {
	var parts []string
	i := 0
	for {
		if i >= len(s) || s[i] != q {
			return nil, false
		}
		i++
		var b strings.Builder
		for {
			if i >= len(s) {
				return nil, false // unterminated
			}
			if s[i] == q {
				if i+1 < len(s) && s[i+1] == q {
					b.WriteByte(q)
					i += 2
					continue
				}
				i++
				break
			}
			b.WriteByte(s[i])
			i++
		}
		parts = append(parts, b.String())
		if i == len(s) {
			return parts, true
		}
		if s[i] != '.' {
			return nil, false
		}
		i++
	}
}

func fuzzQuote(t *testing.T, quote func(...string) (string, error), q byte, a, b string) {
	for _, parts := range [][]string{{a}, {a, b}} {
		out, err := quote(parts...)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", parts, err)
			}
			continue
		}
		got, ok := unquote(out, q)
		if !ok {
			t.Fatalf("%q quoted as %q, which does not parse back as quoted identifiers", parts, out)
		}
		if !slices.Equal(got, parts) {
			t.Fatalf("%q quoted as %q parses back as %q", parts, out, got)
		}
	}
}

var fuzzSeeds = []string{"t", `a"b`, "a`b", `""`, "``", ".", `"."`, "a.b", "x\x00", "\xff", " ", "😀", strings.Repeat("q", 64)}

func FuzzPostgres(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "col")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		fuzzQuote(t, Postgres, '"', a, b)
		// The package quotes as pgx does (it no longer calls pgx, so that
		// the MySQL path does not link it).
		for _, parts := range [][]string{{a}, {a, b}} {
			if out, err := Postgres(parts...); err == nil && out != pgx.Identifier(parts).Sanitize() {
				t.Fatalf("%q quoted as %q, pgx says %q", parts, out, pgx.Identifier(parts).Sanitize())
			}
		}
	})
}

func FuzzMySQL(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "col")
	}
	f.Fuzz(func(t *testing.T, a, b string) { fuzzQuote(t, MySQL, '`', a, b) })
}

func TestDynamoDB(t *testing.T) {
	tables := []struct {
		name string
		ok   bool
	}{
		{"orders", true}, {"a.b-c_D9", true}, {"ab", false}, {"", false},
		{strings.Repeat("t", 255), true}, {strings.Repeat("t", 256), false},
		{"has space", false}, {"ünï", false},
	}
	for _, tc := range tables {
		if err := DynamoDBTable(tc.name); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("DynamoDBTable(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	attrs := []struct {
		name string
		ok   bool
	}{
		{"pk", true}, {"with space ünï", true}, {"", false}, {"a\x00", false}, {"\xff", false},
		{strings.Repeat("a", 255), true}, {strings.Repeat("a", 256), false},
	}
	for _, tc := range attrs {
		if err := DynamoDBAttribute(tc.name); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("DynamoDBAttribute(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
