package upsert

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

var (
	// ErrInvalidArgument is wrapped by every error about a bad argument: a
	// nil handle (typed nil pointers included), an invalid Table or column
	// name, a row without its key, returning columns and destinations of
	// different lengths. Such errors are returned before any I/O.
	ErrInvalidArgument = errors.New("upsert: invalid argument")

	// ErrContended is returned by InsertOrGet when, after MaxReadAttempts
	// tries, the insert kept conflicting with a row that the following read
	// could not find (it was deleted each time in between).
	ErrContended = errors.New("upsert: conflicting row kept disappearing")
)

// AmbiguousCommitError reports that a MySQL/MariaDB write was sent but its
// outcome is unknown (see InsertMySQL): the row may or may not have been
// written, so read it before deciding what to do. It is the module's
// single "outcome unknown" type, shared with the optimistic and fenced
// packages; its Err matches context.Canceled or context.DeadlineExceeded
// when ctx ended the call.
type AmbiguousCommitError = sqlerr.AmbiguousCommitError

// MaxReadAttempts bounds how often InsertOrGet (and, on MySQL, Upsert with
// returning columns) runs again when the conflicting row is not visible to
// its read. One extra attempt is enough unless the row is being deleted
// concurrently.
const MaxReadAttempts = 10

// Table describes where rows live. Names are validated and quoted for the
// target dialect (non-empty, at most 63 bytes for PostgreSQL and 64 for
// MySQL, valid UTF-8, no NUL; DynamoDB table names follow AWS's rules).
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL database).
	// Empty means unqualified. Ignored by DynamoDB.
	Schema string
	// Name is the table name.
	Name string
	// Key is the unique key column (DynamoDB: the partition key; tables
	// with a sort key are not supported). Every row must contain it.
	Key string
}

// spec is a validated call: the row's columns in sorted order (so
// statements are deterministic) and the returning columns.
type spec struct {
	cols      []string // all columns of the row, sorted
	nonKey    []string // cols without the key
	keyIndex  int      // index of the key in cols
	returning []string
}

func (t Table) validate(db any, row map[string]any, returning []string, dest []any) (spec, error) {
	var s spec
	if handle.IsNil(db) {
		return s, fmt.Errorf("%w: nil database handle", ErrInvalidArgument)
	}
	if t.Key == "" {
		return s, fmt.Errorf("%w: empty key column", ErrInvalidArgument)
	}
	if _, ok := row[t.Key]; !ok {
		return s, fmt.Errorf("%w: row has no value for key column %q", ErrInvalidArgument, t.Key)
	}
	if len(returning) != len(dest) {
		return s, fmt.Errorf("%w: %d returning columns but %d destinations", ErrInvalidArgument, len(returning), len(dest))
	}
	for i, d := range dest {
		if handle.IsNil(d) {
			return s, fmt.Errorf("%w: destination %d for %q is nil", ErrInvalidArgument, i, returning[i])
		}
	}
	s.cols = slices.Sorted(maps.Keys(row))
	for i, c := range s.cols {
		if c == t.Key {
			s.keyIndex = i
		} else {
			s.nonKey = append(s.nonKey, c)
		}
	}
	s.returning = returning
	return s, nil
}

// quoted holds a call's identifiers quoted for one SQL dialect.
type quoted struct {
	table, key              string
	cols, nonKey, returning []string
}

func (t Table) quote(q func(parts ...string) (string, error), s spec) (quoted, error) {
	var out quoted
	var err error
	name := []string{t.Name}
	if t.Schema != "" {
		name = []string{t.Schema, t.Name}
	}
	if out.table, err = q(name...); err != nil {
		return out, fmt.Errorf("%w: table: %w", ErrInvalidArgument, err)
	}
	if out.key, err = q(t.Key); err != nil {
		return out, fmt.Errorf("%w: key column: %w", ErrInvalidArgument, err)
	}
	list := func(names []string, what string) ([]string, error) {
		r := make([]string, len(names))
		for i, n := range names {
			if r[i], err = q(n); err != nil {
				return nil, fmt.Errorf("%w: %s column: %w", ErrInvalidArgument, what, err)
			}
		}
		return r, nil
	}
	if out.cols, err = list(s.cols, "row"); err != nil {
		return out, err
	}
	if out.nonKey, err = list(s.nonKey, "row"); err != nil {
		return out, err
	}
	if out.returning, err = list(s.returning, "returning"); err != nil {
		return out, err
	}
	return out, nil
}

// args returns the row's values in column order.
func (s spec) args(row map[string]any) []any {
	a := make([]any, len(s.cols))
	for i, c := range s.cols {
		a[i] = row[c]
	}
	return a
}

// driverError wraps an error from the database for operation op, joining
// ctx.Err() when the context ended the call but the driver did not say so.
func driverError(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("upsert: %s: %w", op, err)
}
