// Package cas holds what the optimistic adapters (optimisticpg,
// optimisticmysql, optimisticdynamo) share and no driver needs: argument
// checks, identifier quoting for a dialect, the statement cache, the
// conflict event and error wrapping. It imports only the standard library
// and stdlib-only concurkit packages.
package cas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
)

// Invalid returns an error matching concurkit.ErrInvalidArgument whose
// message names the adapter: "concurkit: invalid argument: <pkg>: <what>".
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", concurkit.ErrInvalidArgument, pkg, fmt.Sprintf(format, args...))
}

// InvalidErr is Invalid for a cause err, which stays in the chain:
// "concurkit: invalid argument: <pkg>: <what>: <err>".
func InvalidErr(pkg, what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %w", concurkit.ErrInvalidArgument, pkg, what, err)
}

// Prepare checks what every adapter checks before any I/O — a non-nil
// handle db (named what in the error), a positive expected version that
// can be incremented, key and version columns that differ and are not
// assigned by set — and returns t with its defaults applied and set's
// column names sorted, appended to buf[:0] (so statements are
// deterministic and cache well).
func Prepare(pkg string, db any, what string, t optimistic.Table, version int64, set map[string]any, buf []string) (optimistic.Table, []string, error) {
	if handle.IsNil(db) {
		return t, nil, Invalid(pkg, "nil %s", what)
	}
	if version <= 0 {
		return t, nil, Invalid(pkg, "expected version %d is not positive", version)
	}
	if version == math.MaxInt64 {
		// Checked here, in the one place every adapter shares: DynamoDB's
		// next version is computed in Go and would wrap to MinInt64.
		return t, nil, optimistic.ErrVersionOverflow
	}
	t = WithDefaults(t)
	if t.KeyColumn == t.VersionColumn {
		return t, nil, Invalid(pkg, "key and version are the same column %q", t.KeyColumn)
	}
	cols := buf[:0]
	for c := range set {
		if c == t.KeyColumn || c == t.VersionColumn {
			return t, nil, Invalid(pkg, "column %q in set: the key and the version cannot be assigned", c)
		}
		cols = append(cols, c)
	}
	slices.Sort(cols)
	return t, cols, nil
}

// WithDefaults returns t with empty column fields set to their defaults.
func WithDefaults(t optimistic.Table) optimistic.Table {
	if t.KeyColumn == "" {
		t.KeyColumn = optimistic.DefaultKeyColumn
	}
	if t.VersionColumn == "" {
		t.VersionColumn = optimistic.DefaultVersionColumn
	}
	return t
}

// Name is t's name as events and error messages show it: Schema.Name, or
// Name alone (unquoted).
func Name(t optimistic.Table) string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// Quoted holds a Table's identifiers and the set columns quoted for one
// SQL dialect.
type Quoted struct {
	Table, Key, Version string
	Cols                []string
}

// Quote validates and quotes t (defaults applied) and cols with q
// (ident.Postgres or ident.MySQL). Errors match
// concurkit.ErrInvalidArgument.
func Quote(pkg string, t optimistic.Table, cols []string, q func(parts ...string) (string, error)) (Quoted, error) {
	var out Quoted
	var err error
	name := []string{t.Name}
	if t.Schema != "" {
		name = []string{t.Schema, t.Name}
	}
	if out.Table, err = q(name...); err != nil {
		return out, InvalidErr(pkg, "table", err)
	}
	if out.Key, err = q(t.KeyColumn); err != nil {
		return out, InvalidErr(pkg, "key column", err)
	}
	if out.Version, err = q(t.VersionColumn); err != nil {
		return out, InvalidErr(pkg, "version column", err)
	}
	out.Cols = make([]string, len(cols))
	for i, c := range cols {
		if out.Cols[i], err = q(c); err != nil {
			return out, InvalidErr(pkg, "set column", err)
		}
	}
	return out, nil
}

// Key identifies a built statement: the Table (defaults applied), the
// number of set columns and the sorted columns joined by NUL.
//
// The cache is consulted before the names are validated, so a Key must
// never let bad input hit a valid entry. Only valid shapes are stored, and
// a valid name is non-empty and contains no NUL: N tells no columns from
// one empty name, and a joined string whose names contain a NUL has more
// NULs than N-1, so it cannot equal a stored one.
type Key struct {
	T    optimistic.Table
	N    int
	Cols string
}

// KeyOf returns the cache key of t and the sorted cols. It allocates only
// when there are two columns or more (the join).
func KeyOf(t optimistic.Table, cols []string) Key {
	switch len(cols) {
	case 0:
		return Key{T: t}
	case 1:
		return Key{T: t, N: 1, Cols: cols[0]}
	}
	return Key{T: t, N: len(cols), Cols: strings.Join(cols, "\x00")}
}

// MaxCached bounds a Cache: past that many entries, statements are built
// on every call (as they were before the cache) instead of stored, so a
// program that invents table or column names without end cannot grow
// memory without bound. Real programs use a handful of shapes.
const MaxCached = 1024

// Cache maps a Key to what an adapter built for it (statement text,
// expressions): validation and quoting run once per shape, not once per
// call. The zero Cache is ready; it is safe for concurrent use. Only
// successful builds are stored, so bad input fails every time.
type Cache[V any] struct {
	mu sync.RWMutex
	m  map[Key]V
}

// Load returns the value stored for k.
func (c *Cache[V]) Load(k Key) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

// Store records v for k unless the cache is full.
func (c *Cache[V]) Store(k Key, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[Key]V)
	}
	if len(c.m) < MaxCached {
		c.m[k] = v
	}
}

// Len returns the number of stored entries (for tests).
func (c *Cache[V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// Conflict reports the conflict to the hooks of ctx (observe.Hooks.Conflict,
// Package pkg, Table Name(t)) and returns optimistic.ErrConflict. The hooks
// are looked up only here, on the conflict path, and the event is built
// only when hooks are installed: no cost on the success path, no
// allocation without hooks.
func Conflict(ctx context.Context, pkg string, t optimistic.Table) error {
	if h := observe.FromContext(ctx); h != nil {
		h.OnConflict(ctx, observe.ConflictEvent{Package: pkg, Table: Name(t)})
	}
	return optimistic.ErrConflict
}

// DriverError wraps an error from the database for operation op as
// "<pkg>: <op>: <err>", joining ctx.Err() when the context ended the call
// but the driver did not say so, so that errors.Is(err, context.Canceled)
// holds whenever ctx was cancelled.
func DriverError(ctx context.Context, pkg, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}
