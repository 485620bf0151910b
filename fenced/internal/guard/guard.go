// Package guard is the part of the fenced adapters that no driver needs:
// argument checks, name resolution, the statement cache, and the
// stale-token outcome with its hook. It imports only the standard library
// and stdlib-only concurkit packages.
package guard

import (
	"context"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/observe"
)

// Invalid returns an error matching concurkit.ErrInvalidArgument with the
// message "<pkg>: <what>".
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", concurkit.ErrInvalidArgument, pkg, fmt.Sprintf(format, args...))
}

// CheckToken returns nil for a valid token, otherwise an error matching
// fenced.ErrInvalidToken.
func CheckToken(t fenced.Token) error {
	if !t.Valid() {
		return fmt.Errorf("%w: %d", fenced.ErrInvalidToken, int64(t))
	}
	return nil
}

// Checked converts a value read from a token source to a Token, or an error
// matching fenced.ErrInvalidToken for a value ≤ 0.
func Checked(v int64) (fenced.Token, error) {
	t := fenced.Token(v)
	if err := CheckToken(t); err != nil {
		return 0, err
	}
	return t, nil
}

// Names is a Table with defaults applied and the shared rules checked,
// before the dialect quotes (and validates) each name.
type Names struct {
	Table   []string // schema (optional) and name
	Key     string
	Token   string
	Version string   // "" when the table has no version column
	Columns []string // the assigned columns, sorted
}

// Resolve applies t's defaults and checks what every dialect shares: a
// table name, distinct key, token and version columns, and assigned
// columns that are none of them. cols must be sorted and distinct (the
// keys of a map). Errors match concurkit.ErrInvalidArgument.
func Resolve(pkg string, t fenced.Table, cols []string) (Names, error) {
	n := Names{Key: t.KeyColumn, Token: t.TokenColumn, Version: t.VersionColumn, Columns: cols}
	if t.Name == "" {
		return n, Invalid(pkg, "empty table name")
	}
	n.Table = []string{t.Name}
	if t.Schema != "" {
		n.Table = []string{t.Schema, t.Name}
	}
	if n.Key == "" {
		n.Key = fenced.DefaultKeyColumn
	}
	if n.Token == "" {
		n.Token = fenced.DefaultTokenColumn
	}
	if n.Key == n.Token {
		return n, Invalid(pkg, "key and token column are both %q", n.Key)
	}
	if n.Version != "" && (n.Version == n.Key || n.Version == n.Token) {
		return n, Invalid(pkg, "version column %q is also the key or token column", n.Version)
	}
	for _, c := range cols {
		switch c {
		case "":
			return n, Invalid(pkg, "empty column name")
		case n.Key, n.Token, n.Version:
			return n, Invalid(pkg, "set assigns %q, the key, token or version column", c)
		}
	}
	return n, nil
}

// Quoted is Names quoted by a dialect.
type Quoted struct {
	Table, Key, Token, Version string // Version "" when unset
	Columns                    []string
}

// Quote quotes every name of n with q (ident.Postgres, ident.MySQL), which
// also validates it; errors match concurkit.ErrInvalidArgument.
func (n Names) Quote(pkg string, q func(parts ...string) (string, error)) (Quoted, error) {
	var out Quoted
	var err error
	if out.Table, err = q(n.Table...); err != nil {
		return out, Invalid(pkg, "table: %v", err)
	}
	if out.Key, err = q(n.Key); err != nil {
		return out, Invalid(pkg, "key column: %v", err)
	}
	if out.Token, err = q(n.Token); err != nil {
		return out, Invalid(pkg, "token column: %v", err)
	}
	if n.Version != "" {
		if out.Version, err = q(n.Version); err != nil {
			return out, Invalid(pkg, "version column: %v", err)
		}
	}
	for _, c := range n.Columns {
		qc, err := q(c)
		if err != nil {
			return out, Invalid(pkg, "column: %v", err)
		}
		out.Columns = append(out.Columns, qc)
	}
	return out, nil
}

// Resource is the table name reported in events and errors: "schema.name"
// or "name".
func (n Names) Resource() string {
	if len(n.Table) == 2 {
		return n.Table[0] + "." + n.Table[1]
	}
	return n.Table[0]
}

// Stale reports a refused write to the FenceRejected hook of ctx and
// returns the error matching fenced.ErrStaleToken. seen is the highest
// token the storage has seen, 0 if unknown. It runs only on the refusal
// path, so a call without hooks installed pays nothing for the hook.
func Stale(ctx context.Context, pkg, resource string, token, seen fenced.Token) error {
	observe.FromContext(ctx).OnFenceRejected(ctx, observe.FenceEvent{
		Package: pkg, Resource: resource, Token: int64(token), Seen: int64(seen),
	})
	if seen > 0 {
		return fmt.Errorf("%w: %s: token %d, storage has seen %d", fenced.ErrStaleToken, resource, int64(token), int64(seen))
	}
	return fmt.Errorf("%w: %s: token %d", fenced.ErrStaleToken, resource, int64(token))
}

// StaleOrSame interprets the token read back after a write that changed
// nothing: equal means the same holder's write was accepted (it rewrote
// identical values), higher means a successor fenced it out. The stored
// token never decreases, so an equal value proves the guard passed.
func StaleOrSame(ctx context.Context, pkg, resource string, stored, token fenced.Token) error {
	if stored == token {
		return nil
	}
	return Stale(ctx, pkg, resource, token, stored)
}

// DriverError wraps a driver error as "<pkg>: <what>: <err>" and, when ctx
// has ended, makes sure the result matches ctx.Err() (a driver may report
// the interruption as a plain I/O error).
func DriverError(ctx context.Context, pkg, what string, err error) error {
	err = fmt.Errorf("%s: %s: %w", pkg, what, err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return err
}
