package optimistic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/retry"
)

// retryableError is a sentinel that retry.IsRetryable accepts.
type retryableError string

func (e retryableError) Error() string { return string(e) }
func (retryableError) Retryable() bool { return true }

// notFoundError matches both ErrNotFound and sql.ErrNoRows.
type notFoundError struct{}

func (notFoundError) Error() string { return "optimistic: row not found" }
func (notFoundError) Unwrap() error { return sql.ErrNoRows }

var (
	// ErrConflict is returned by the Update helpers when the row exists but
	// its version is no longer the expected one: another writer got there
	// first. It is retryable (retry.IsRetryable reports true), so Do runs
	// the caller's read-modify-write again.
	ErrConflict error = retryableError("optimistic: version conflict")

	// ErrNotFound is returned by the Update helpers when no row or item has
	// the key. errors.Is(err, sql.ErrNoRows) is also true for it. It is not
	// retryable.
	ErrNotFound error = notFoundError{}

	// ErrInvalidArgument is wrapped by every error about a bad argument: a
	// nil handle (typed nil pointers included), an invalid Table, a version
	// that is not positive or cannot be incremented, a column that cannot
	// be set. Such errors are returned before any I/O.
	ErrInvalidArgument = errors.New("optimistic: invalid argument")

	// ErrVersionOverflow is returned, before any I/O, by every Update
	// helper when expectedVersion is math.MaxInt64: the next version does
	// not fit an int64 (a BIGINT column or a DynamoDB number read back as
	// int64). It wraps ErrInvalidArgument. PostgreSQL and MariaDB would
	// reject the increment with an out-of-range error and Go arithmetic
	// would wrap to a negative version, so all three adapters refuse it
	// the same way; the row or item is left unchanged.
	ErrVersionOverflow = fmt.Errorf("%w: version overflow: expected version is math.MaxInt64", ErrInvalidArgument)
)

// AmbiguousCommitError reports that an update was sent but its outcome is
// unknown (see UpdateMySQL): the row may or may not have been updated, so
// re-read it before deciding what to do. It is the module's single "outcome
// unknown" type, shared with the fenced and upsert packages; its Err
// matches context.Canceled or context.DeadlineExceeded when ctx ended the
// call. It is not retryable.
type AmbiguousCommitError = sqlerr.AmbiguousCommitError

// Table describes where versioned rows live. Names are validated and quoted
// for the target dialect (internal/ident rules: non-empty, at most 63 bytes
// for PostgreSQL and 64 for MySQL, valid UTF-8, no NUL; DynamoDB table names
// follow AWS's rules); an invalid name makes every call fail with
// ErrInvalidArgument.
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL database).
	// Empty means unqualified (search_path / the connection's database).
	// Ignored by DynamoDB.
	Schema string
	// Name is the table name.
	Name string
	// Key is the unique key column (DynamoDB: the partition key attribute;
	// tables with a sort key are not supported).
	Key string
	// Version is the version column (attribute): a NOT NULL integer.
	Version string
}

// validate checks the parts that are not dialect specific and the set
// columns, and returns the set column names in sorted order so that
// statements are deterministic (and cache well as prepared statements).
func (t Table) validate(db any, version int64, set map[string]any) ([]string, error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%w: nil database handle", ErrInvalidArgument)
	}
	if version <= 0 {
		return nil, fmt.Errorf("%w: expected version %d is not positive", ErrInvalidArgument, version)
	}
	if version == math.MaxInt64 {
		// Checked here, in the one place every adapter shares: DynamoDB's
		// next version is computed in Go and would wrap to MinInt64.
		return nil, ErrVersionOverflow
	}
	if t.Key == t.Version {
		return nil, fmt.Errorf("%w: key and version are the same column %q", ErrInvalidArgument, t.Key)
	}
	cols := slices.Sorted(maps.Keys(set))
	for _, c := range cols {
		if c == t.Key || c == t.Version {
			return nil, fmt.Errorf("%w: column %q in set: the key and the version cannot be assigned", ErrInvalidArgument, c)
		}
	}
	return cols, nil
}

// quoted holds a Table's identifiers and the set columns quoted for one
// SQL dialect.
type quoted struct {
	table, key, version string
	cols                []string
}

func (t Table) quote(q func(parts ...string) (string, error), cols []string) (quoted, error) {
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
	if out.version, err = q(t.Version); err != nil {
		return out, fmt.Errorf("%w: version column: %w", ErrInvalidArgument, err)
	}
	out.cols = make([]string, len(cols))
	for i, c := range cols {
		if out.cols[i], err = q(c); err != nil {
			return out, fmt.Errorf("%w: set column: %w", ErrInvalidArgument, err)
		}
	}
	return out, nil
}

// outcome turns what a CAS statement observed into the result every adapter
// returns: the new version, ErrConflict or ErrNotFound.
func outcome(updated, exists bool, newVersion int64) (int64, error) {
	switch {
	case updated:
		return newVersion, nil
	case exists:
		return 0, ErrConflict
	default:
		return 0, ErrNotFound
	}
}

// Do runs fn, the caller's read-modify-write, until it succeeds or fails
// with an error that is not retryable, using retry.Do with policy p (the
// zero Policy means retry's defaults: 10 attempts, 2 ms base delay doubling
// to 500 ms, full jitter). ErrConflict is retryable under the default
// classifier, as are deadlocks and serialization failures; a custom
// p.Retryable replaces that classifier entirely.
//
// fn must read the current state (and version) afresh on every call. Do
// returns nil on success, fn's error when it is not retryable,
// *retry.ExhaustedError (which matches retry.ErrExhausted and unwraps to the
// last error, e.g. ErrConflict) when the attempts run out, and an error
// matching ctx.Err() as well as the last error when ctx ends between
// attempts.
func Do(ctx context.Context, p retry.Policy, fn func(ctx context.Context) error) error {
	return retry.Do(ctx, p, fn)
}

// DoValue is Do for a read-modify-write that produces a value, such as the
// new version: it returns the value of the successful call, or T's zero
// value with the error Do would return.
func DoValue[T any](ctx context.Context, p retry.Policy, fn func(ctx context.Context) (T, error)) (T, error) {
	var out T
	if fn == nil {
		return out, fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	err := retry.Do(ctx, p, func(ctx context.Context) error {
		v, err := fn(ctx)
		if err == nil {
			out = v
		}
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// driverError wraps an error from the database for operation op, joining
// ctx.Err() when the context ended the call but the driver did not say so,
// so that errors.Is(err, context.Canceled) holds whenever ctx was cancelled.
func driverError(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("optimistic: %s: %w", op, err)
}
