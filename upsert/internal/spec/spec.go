// Package spec holds what the upsert adapters (upsertpg, upsertmysql,
// upsertdynamo) share and no driver needs: argument checks, identifier
// quoting for a dialect and error wrapping. It imports only the standard
// library and stdlib-only concurkit packages.
package spec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/upsert"
)

// Invalid returns an error matching concurkit.ErrInvalidArgument whose
// message names the adapter: "concurkit: invalid argument: <pkg>: <what>".
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", concurkit.ErrInvalidArgument, pkg, fmt.Sprintf(format, args...))
}

// InvalidErr is Invalid for a cause err, which stays in the chain.
func InvalidErr(pkg, what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %w", concurkit.ErrInvalidArgument, pkg, what, err)
}

// Spec is a validated call: the Table with its defaults, the row's columns
// in sorted order (so statements are deterministic) and the returning
// columns.
type Spec struct {
	T         upsert.Table
	Cols      []string // all columns of the row, sorted
	NonKey    []string // Cols without the key
	KeyIndex  int      // index of the key in Cols
	Returning []string
}

// Validate checks, before any I/O, what every adapter checks: a non-nil
// handle db (named what in the error), a row with a value for the key
// column, as many non-nil destinations as returning columns. It applies
// t's defaults.
func Validate(pkg string, db any, what string, t upsert.Table, row map[string]any, returning []string, dest []any) (Spec, error) {
	var s Spec
	if handle.IsNil(db) {
		return s, Invalid(pkg, "nil %s", what)
	}
	if t.KeyColumn == "" {
		t.KeyColumn = upsert.DefaultKeyColumn
	}
	s.T = t
	if _, ok := row[t.KeyColumn]; !ok {
		return s, Invalid(pkg, "row has no value for key column %q", t.KeyColumn)
	}
	if len(returning) != len(dest) {
		return s, Invalid(pkg, "%d returning columns but %d destinations", len(returning), len(dest))
	}
	for i, d := range dest {
		if handle.IsNil(d) {
			return s, Invalid(pkg, "destination %d for %q is nil", i, returning[i])
		}
	}
	s.Cols = slices.Sorted(maps.Keys(row))
	for i, c := range s.Cols {
		if c == t.KeyColumn {
			s.KeyIndex = i
		} else {
			s.NonKey = append(s.NonKey, c)
		}
	}
	s.Returning = returning
	return s, nil
}

// Args returns the row's values in column order.
func (s Spec) Args(row map[string]any) []any {
	a := make([]any, len(s.Cols))
	for i, c := range s.Cols {
		a[i] = row[c]
	}
	return a
}

// Key returns the row's key value.
func (s Spec) Key(row map[string]any) any { return row[s.Cols[s.KeyIndex]] }

// Quoted holds a call's identifiers quoted for one SQL dialect.
type Quoted struct {
	Table, Key              string
	Cols, NonKey, Returning []string
}

// Quote validates and quotes the call's names with q (ident.Postgres or
// ident.MySQL). Errors match concurkit.ErrInvalidArgument.
func (s Spec) Quote(pkg string, q func(parts ...string) (string, error)) (Quoted, error) {
	var out Quoted
	var err error
	name := []string{s.T.Name}
	if s.T.Schema != "" {
		name = []string{s.T.Schema, s.T.Name}
	}
	if out.Table, err = q(name...); err != nil {
		return out, InvalidErr(pkg, "table", err)
	}
	if out.Key, err = q(s.T.KeyColumn); err != nil {
		return out, InvalidErr(pkg, "key column", err)
	}
	list := func(names []string, what string) ([]string, error) {
		r := make([]string, len(names))
		for i, n := range names {
			if r[i], err = q(n); err != nil {
				return nil, InvalidErr(pkg, what+" column", err)
			}
		}
		return r, nil
	}
	if out.Cols, err = list(s.Cols, "row"); err != nil {
		return out, err
	}
	if out.NonKey, err = list(s.NonKey, "row"); err != nil {
		return out, err
	}
	if out.Returning, err = list(s.Returning, "returning"); err != nil {
		return out, err
	}
	return out, nil
}

// Name is the table's name as error messages show it: Schema.Name, or
// Name alone (unquoted).
func (s Spec) Name() string {
	if s.T.Schema == "" {
		return s.T.Name
	}
	return s.T.Schema + "." + s.T.Name
}

// Contended returns upsert.ErrContended for the call's table after
// MaxReadAttempts attempts.
func (s Spec) Contended() error {
	return fmt.Errorf("%w: %s after %d attempts", upsert.ErrContended, s.Name(), upsert.MaxReadAttempts)
}

// DriverError wraps an error from the database for operation op as
// "<pkg>: <op>: <err>", joining ctx.Err() when the context ended the call
// but the driver did not say so.
func DriverError(ctx context.Context, pkg, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}
