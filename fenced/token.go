package fenced

import (
	"context"
	"errors"
	"fmt"
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

// Source mints fencing tokens. Every call returns a token strictly greater
// than every token returned before it by the same source (across processes,
// when the source is backed by shared storage).
type Source interface {
	Next(ctx context.Context) (Token, error)
}
