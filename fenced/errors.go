package fenced

import (
	"database/sql"
	"errors"

	"github.com/concurkit/concurkit"
)

// ErrStaleToken is returned by guarded writes when the storage has already
// seen a higher token for the row, item or resource: the writer's lock was
// taken over and its write did not happen. Its observe.ErrorType is
// "stale_token".
var ErrStaleToken error = &sentinel{msg: "fenced: stale token", typ: "stale_token"}

// ErrInvalidToken is returned, before any I/O, for a token ≤ 0, and by a
// Source whose storage yields one. It matches concurkit.ErrInvalidArgument;
// its observe.ErrorType is "invalid_token".
var ErrInvalidToken error = &sentinel{msg: "fenced: invalid token", typ: "invalid_token", kind: concurkit.ErrInvalidArgument}

// ErrTokenOverflow is returned by a Source that has reached the largest
// token it can mint: math.MaxInt64 for fenceddynamo.Counter (whose numbers
// could go further but would not fit a Token), the sequence's MAXVALUE for
// fencedpg.Sequence (SQLSTATE 2200H) and fencedmysql.Sequence (MariaDB
// error 4084). Every later call fails the same way: the source must be
// replaced, never wrapped around, since a lower token would be refused
// everywhere. It matches ErrInvalidToken and concurkit.ErrInvalidArgument.
var ErrTokenOverflow error = &sentinel{msg: "fenced: token source exhausted", typ: "invalid_token", kind: ErrInvalidToken}

// ErrNotFound is returned by the adapters' Update when no row has the key.
// It also matches sql.ErrNoRows and pgx.ErrNoRows with errors.Is, so code
// that checks the driver's "no rows" keeps working. Its observe.ErrorType
// is "not_found".
var ErrNotFound error = &notFound{sentinel{msg: "fenced: row not found", typ: "not_found"}}

// sentinel is a fenced error with a stable, low-cardinality ErrorType for
// metrics (observe.ErrorType), optionally matching a more general error.
type sentinel struct {
	msg  string
	typ  string
	kind error // the more general error it matches, or nil
}

func (e *sentinel) Error() string     { return e.msg }
func (e *sentinel) ErrorType() string { return e.typ }
func (e *sentinel) Unwrap() error     { return e.kind }

type notFound struct{ sentinel }

// Is reports whether target is, or wraps, sql.ErrNoRows: pgx.ErrNoRows
// (which wraps it, and which this stdlib-only package cannot name) and the
// other concurkit not-found sentinels (optimistic.ErrNotFound) included.
func (e *notFound) Is(target error) bool { return errors.Is(target, sql.ErrNoRows) }
