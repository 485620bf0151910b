package fenced_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/fenced"
)

// recorder captures the SQL text a guarded write sends; it answers as if
// one row was affected. It is a test of the SQL builder only: behaviour is
// tested against real servers elsewhere.
type recorder struct{ sql string }

func (r *recorder) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	r.sql = sql
	return pgconn.NewCommandTag("INSERT 0 1"), nil
}
func (r *recorder) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("unused")
}
func (r *recorder) QueryRow(context.Context, string, ...any) pgx.Row { return nil }

func (r *recorder) ExecContext(_ context.Context, sql string, _ ...any) (sql.Result, error) {
	r.sql = sql
	return result(2), nil
}
func (r *recorder) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("unused")
}
func (r *recorder) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }

type result int64

func (r result) LastInsertId() (int64, error) { return 0, nil }
func (r result) RowsAffected() (int64, error) { return int64(r), nil }

// stripQuoted removes every quoted identifier (quote char q, doubled to
// escape) and reports false if a quote is left open.
func stripQuoted(s string, q byte) (string, bool) {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case !in && c == q:
			in = true
			b.WriteString("@")
		case in && c == q && i+1 < len(s) && s[i+1] == q:
			i++
		case in && c == q:
			in = false
		case !in:
			b.WriteByte(c)
		}
	}
	return b.String(), !in
}

// FuzzGuardSQL: whatever names a caller passes, either they are rejected
// with ErrInvalidGuard or the statement is the fixed template with the
// names inside properly closed quotes, so no name can change the SQL.
func FuzzGuardSQL(f *testing.F) {
	f.Add("accounts", "id", "max_seen_token", "owner", "public")
	f.Add(`a"b`, "k`", "t;DROP TABLE x", "c\"\"", "")
	f.Add("t", "k", "tok", "x`y", "s`")
	f.Fuzz(func(t *testing.T, table, key, tok, col, schema string) {
		g := fenced.Guard{Schema: schema, Table: table, KeyColumn: key, TokenColumn: tok}
		ref := fenced.Guard{Table: "t", KeyColumn: "k", TokenColumn: "tok"}
		if schema != "" {
			ref.Schema = "s"
		}
		set := []fenced.Set{{Column: col, Value: 1}}
		refSet := []fenced.Set{{Column: "c", Value: 1}}
		ctx := context.Background()
		for _, d := range []struct {
			name  string
			quote byte
			run   func(r *recorder, g fenced.Guard, set []fenced.Set) error
		}{
			{"WritePostgres", '"', func(r *recorder, g fenced.Guard, set []fenced.Set) error {
				return fenced.WritePostgres(ctx, r, g, 1, 1, set...)
			}},
			{"UpdatePostgres", '"', func(r *recorder, g fenced.Guard, set []fenced.Set) error {
				return fenced.UpdatePostgres(ctx, r, g, 1, 1, set...)
			}},
			{"WriteMySQL", '`', func(r *recorder, g fenced.Guard, set []fenced.Set) error {
				return fenced.WriteMySQL(ctx, r, g, 1, 1, set...)
			}},
			{"UpdateMySQL", '`', func(r *recorder, g fenced.Guard, set []fenced.Set) error {
				return fenced.UpdateMySQL(ctx, r, g, 1, 1, set...)
			}},
		} {
			var got, want recorder
			if err := d.run(&want, ref, refSet); err != nil {
				t.Fatal(err)
			}
			err := d.run(&got, g, set)
			if err != nil {
				if !errors.Is(err, fenced.ErrInvalidGuard) {
					t.Fatalf("%s: unexpected error %v", d.name, err)
				}
				continue
			}
			gs, ok := stripQuoted(got.sql, d.quote)
			ws, _ := stripQuoted(want.sql, d.quote)
			if !ok || gs != ws {
				t.Fatalf("%s: names changed the statement:\n%s\nwant the shape of\n%s", d.name, got.sql, want.sql)
			}
		}
	})
}
