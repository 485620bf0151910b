package fencedpg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/fenced/internal/fencedtest"
)

// recorder captures the SQL text a guarded write sends; it answers as if
// one row was affected. It tests the SQL builder (and, in alloc_test.go,
// the client-side cost) only: behaviour is tested against the server.
type recorder struct {
	sql  string
	args []any
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.NewCommandTag("UPDATE 1"), nil
}
func (r *recorder) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("unused")
}
func (r *recorder) QueryRow(context.Context, string, ...any) pgx.Row { return nil }

// FuzzGuardSQL: whatever names a caller passes, either they are rejected
// with concurkit.ErrInvalidArgument or the statement is the fixed template
// with the names inside properly closed quotes, so no name can change the
// SQL.
func FuzzGuardSQL(f *testing.F) {
	f.Add("accounts", "id", "max_seen_token", "owner", "public", "")
	f.Add(`a"b`, "k`", "t;DROP TABLE x", "c\"\"", "", `v"`)
	f.Add("t", "k", "tok", "x`y", "s`", "version")
	f.Fuzz(func(t *testing.T, table, key, tok, col, schema, version string) {
		g := fenced.Table{Schema: schema, Name: table, KeyColumn: key, TokenColumn: tok, VersionColumn: version}
		ref := fenced.Table{Name: "t", KeyColumn: "k", TokenColumn: "tok"}
		if schema != "" {
			ref.Schema = "s"
		}
		if version != "" {
			ref.VersionColumn = "v"
		}
		ctx := context.Background()
		for _, d := range []struct {
			name string
			run  func(r *recorder, g fenced.Table, set map[string]any) error
		}{
			{"Write", func(r *recorder, g fenced.Table, set map[string]any) error {
				return fencedpg.Write(ctx, r, g, 1, 1, set)
			}},
			{"Update", func(r *recorder, g fenced.Table, set map[string]any) error {
				return fencedpg.Update(ctx, r, g, 1, 1, set)
			}},
		} {
			var got, want recorder
			if err := d.run(&want, ref, map[string]any{"c": 1}); err != nil {
				t.Fatal(err)
			}
			err := d.run(&got, g, map[string]any{col: 1})
			if err != nil {
				if !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Fatalf("%s: unexpected error %v", d.name, err)
				}
				continue
			}
			gs, ok := fencedtest.StripQuoted(got.sql, '"')
			ws, _ := fencedtest.StripQuoted(want.sql, '"')
			if !ok || gs != ws {
				t.Fatalf("%s: names changed the statement:\n%s\nwant the shape of\n%s", d.name, got.sql, want.sql)
			}
		}
	})
}
