package optimistic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/retry"
)

// Defaults of Table's column fields: the zero value of a field means these.
const (
	DefaultKeyColumn     = "id"
	DefaultVersionColumn = "version"
)

// conflictError is ErrConflict's type: retry.IsRetryable accepts it.
type conflictError struct{}

// Error returns the message.
func (conflictError) Error() string { return "optimistic: version conflict" }

// Retryable reports true: Do and the transaction helpers retry a conflict.
func (conflictError) Retryable() bool { return true }

// ErrorType is the name observe.ErrorType reports.
func (conflictError) ErrorType() string { return "conflict" }

// notFoundError is ErrNotFound's type.
type notFoundError struct{}

// Error returns the message.
func (notFoundError) Error() string { return "optimistic: row not found" }

// Is makes errors.Is(ErrNotFound, target) true for sql.ErrNoRows and for
// every error that wraps it, pgx.ErrNoRows included, without importing a
// driver.
func (notFoundError) Is(target error) bool { return errors.Is(target, sql.ErrNoRows) }

// ErrorType is the name observe.ErrorType reports.
func (notFoundError) ErrorType() string { return "not_found" }

var (
	// ErrConflict is returned by the adapters' Update when the row exists
	// but its version is no longer the expected one: another writer got
	// there first. It is retryable (retry.IsRetryable reports true), so Do,
	// DoValue and the pessimistic transaction helpers run the caller's
	// read-modify-write again. The adapters report every ErrConflict to
	// observe.Hooks.Conflict of the call's context.
	ErrConflict error = conflictError{}

	// ErrNotFound is returned by the adapters' Update when no row or item
	// has the key. errors.Is(err, sql.ErrNoRows) and
	// errors.Is(err, pgx.ErrNoRows) are also true for it, so code written
	// against either driver's "no rows" keeps working. It is not retryable.
	ErrNotFound error = notFoundError{}

	// ErrVersionOverflow is returned, before any I/O, by every adapter's
	// Update when expectedVersion is math.MaxInt64: the next version does
	// not fit an int64 (a BIGINT column or a DynamoDB number read back as
	// int64). It matches concurkit.ErrInvalidArgument. PostgreSQL and
	// MariaDB would reject the increment with an out-of-range error and Go
	// arithmetic would wrap to a negative version, so all three adapters
	// refuse it the same way; the row or item is left unchanged.
	ErrVersionOverflow = concurkit.InvalidArgumentError("optimistic: version overflow: expected version is math.MaxInt64")
)

// Table describes where versioned rows live. A zero field means its
// default. Names are validated and quoted by each adapter for its dialect
// (non-empty, at most 63 bytes for PostgreSQL and 64 for MySQL, valid
// UTF-8, no NUL; DynamoDB table names follow AWS's rules); an invalid name
// makes every call fail with an error matching concurkit.ErrInvalidArgument,
// before any I/O.
//
// A Table is a plain value: the adapters cache the statement they build
// for each (Table, set columns) pair, so reusing one Table value for many
// calls costs nothing extra.
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL database).
	// Empty means unqualified (search_path / the connection's database).
	// Ignored by DynamoDB.
	Schema string
	// Name is the table name (required).
	Name string
	// KeyColumn is the unique key column; empty means DefaultKeyColumn
	// ("id"). DynamoDB: the partition key attribute (tables with a sort key
	// are not supported).
	KeyColumn string
	// VersionColumn is the version column (attribute), a NOT NULL integer;
	// empty means DefaultVersionColumn ("version").
	VersionColumn string
}

// Do runs fn, the caller's read-modify-write, until it succeeds or fails
// with an error that is not retryable, using retry.Do with policy p (the
// zero Policy means retry's defaults: retry for up to 5 s, however many
// attempts, 2 ms base delay doubling to 100 ms, full jitter). ErrConflict is retryable under the default
// classifier, as are deadlocks and serialization failures; a custom
// p.Retryable replaces that classifier entirely.
//
// fn must read the current state (and version) afresh on every call. Do
// returns nil on success; an error matching concurkit.ErrInvalidArgument
// for a nil fn; retry.Do's error for an invalid policy (fn is not called
// in either case); fn's error when it
// is not retryable; *retry.ExhaustedError (which matches retry.ErrExhausted
// and unwraps to the last error, e.g. ErrConflict) when the attempts run
// out; and an error matching ctx.Err() as well as the last error when ctx
// ends between attempts.
//
// Do is for one row. Work that must change several rows together runs
// inside one transaction whose helper retries the whole transaction on
// ErrConflict (see the package documentation).
func Do(ctx context.Context, p retry.Policy, fn func(ctx context.Context) error) error {
	if fn == nil {
		return fmt.Errorf("%w: optimistic: nil function", concurkit.ErrInvalidArgument)
	}
	return retry.Do(ctx, p, fn)
}

// DoValue is Do for a read-modify-write that produces a value, such as the
// new version: it returns the value of the successful call, or T's zero
// value with the error Do would return.
func DoValue[T any](ctx context.Context, p retry.Policy, fn func(ctx context.Context) (T, error)) (T, error) {
	var out T
	if fn == nil {
		return out, fmt.Errorf("%w: optimistic: nil function", concurkit.ErrInvalidArgument)
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
