package ident

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPostgresMatchesPgx: Postgres quotes exactly as pgx does, without
// linking pgx into the packages that use it.
func TestPostgresMatchesPgx(t *testing.T) {
	for _, parts := range [][]string{
		{"jobs"}, {"app", "jobs"}, {`we"ird`}, {`""`, `a"."b`}, {"ünïcode", "Mixed Case"}, {"back`tick"},
	} {
		got, err := Postgres(parts...)
		if err != nil {
			t.Fatal(err)
		}
		if want := pgx.Identifier(parts).Sanitize(); got != want {
			t.Errorf("Postgres(%q) = %s, pgx says %s", parts, got, want)
		}
	}
}

// FuzzPostgresMatchesPgx: for every name Postgres accepts, the quoting is
// pgx's.
func FuzzPostgresMatchesPgx(f *testing.F) {
	f.Add("a", `b"c`)
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := Postgres(a, b)
		if err != nil {
			return
		}
		if want := (pgx.Identifier{a, b}).Sanitize(); got != want {
			t.Fatalf("Postgres(%q, %q) = %s, pgx says %s", a, b, got, want)
		}
	})
}
