package fenced

import (
	"context"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit/internal/sqlerr"
)

// Token is a fencing token: a positive int64, strictly increasing in the
// order in which lock holders obtain the lock. It fits SQL BIGINT and a
// DynamoDB number. The zero Token is invalid.
type Token int64

// Valid reports whether t is positive.
func (t Token) Valid() bool { return t > 0 }

// String returns the decimal form of t.
func (t Token) String() string { return fmt.Sprintf("%d", int64(t)) }

// ErrStaleToken is returned by guarded writes when the storage has already
// seen a higher token for the resource: the writer's lock was taken over and
// its write must not happen.
var ErrStaleToken = errors.New("fenced: stale token")

// ErrInvalidToken is returned when a token is zero or negative.
var ErrInvalidToken = errors.New("fenced: invalid token")

// ErrTokenOverflow is returned by a Source that has reached the largest
// token it can mint: math.MaxInt64 for DynamoDBCounter (whose numbers could
// go further but would not fit a Token), the sequence's MAXVALUE for
// PostgresSequence (SQLSTATE 2200H) and MySQLSequence (MariaDB error
// 4084). Every later call fails the same way: the source must be replaced,
// never wrapped around, since a lower token would be refused everywhere.
// It wraps ErrInvalidToken.
var ErrTokenOverflow = fmt.Errorf("%w: token source exhausted", ErrInvalidToken)

// AmbiguousCommitError reports that a guarded MySQL/MariaDB write was sent
// but its outcome is unknown (see WriteMySQL): it may or may not have been
// applied, so read the row before deciding what to do. It is the module's
// single "outcome unknown" type, shared with the optimistic and upsert
// packages; its Err matches context.Canceled or context.DeadlineExceeded
// when ctx ended the call.
type AmbiguousCommitError = sqlerr.AmbiguousCommitError

// Source mints fencing tokens. Every call returns a token strictly greater
// than every token returned before it by the same source (across processes,
// when the source is backed by shared storage).
type Source interface {
	Next(ctx context.Context) (Token, error)
}
