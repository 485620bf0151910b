package fenced

import (
	"context"
	"strconv"
)

// Token is a fencing token: a positive int64, strictly increasing in the
// order in which lock holders obtain the lock. It fits SQL BIGINT and a
// DynamoDB number. The zero Token is invalid.
type Token int64

// Valid reports whether t is positive.
func (t Token) Valid() bool { return t > 0 }

// String returns the decimal form of t.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }

// Source mints fencing tokens. Every call returns a token strictly greater
// than every token returned before it by the same source (across processes,
// when the source is backed by shared storage). fencedpg.Sequence,
// fencedmysql.Sequence and fenceddynamo.Counter implement it.
type Source interface {
	Next(ctx context.Context) (Token, error)
}
