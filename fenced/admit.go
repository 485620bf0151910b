package fenced

import (
	"context"
	"fmt"
)

// Default fence table (see the package's migration SQL):
//
//	CREATE TABLE concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)
const (
	DefaultFenceTable = "concurkit_fences"
	fenceKeyColumn    = "resource"
)

// Fence names the table of fence rows used by Admit. The zero value means
// DefaultFenceTable in the connection's default schema.
type Fence struct {
	Schema string
	Table  string
}

func (f Fence) guard() Guard {
	t := f.Table
	if t == "" {
		t = DefaultFenceTable
	}
	return Guard{Schema: f.Schema, Table: t, KeyColumn: fenceKeyColumn, TokenColumn: DefaultTokenColumn}
}

// Admit checks token against the fence row of resource and advances it,
// inside the caller's transaction tx, using DefaultFenceTable. Run the
// guarded side effect (a write elsewhere, a message, a call) only after
// the transaction that admitted the token commits: the row stays locked
// until then, so a concurrent holder with a higher token waits and a lower
// one fails.
//
// It returns nil when token ≥ every token admitted before for resource
// (an equal token passes), ErrStaleToken otherwise, ErrInvalidToken for
// token ≤ 0, ErrInvalidGuard for an empty resource, ErrNilHandle for a
// nil tx, and driver errors wrapped.
func Admit(ctx context.Context, tx DBTX, resource string, token Token) error {
	return Fence{}.Admit(ctx, tx, resource, token)
}

// AdmitMySQL is Admit for MySQL/MariaDB (WriteMySQL on the fence row). Its
// "unchanged" check is a locking read, so it also refuses a stale token
// inside a REPEATABLE READ transaction whose snapshot predates the
// successor's token.
func AdmitMySQL(ctx context.Context, tx SQLDBTX, resource string, token Token) error {
	return Fence{}.AdmitMySQL(ctx, tx, resource, token)
}

// Admit is the package-level Admit on the fence table f.
func (f Fence) Admit(ctx context.Context, tx DBTX, resource string, token Token) error {
	if resource == "" {
		return fmt.Errorf("%w: empty resource", ErrInvalidGuard)
	}
	return WritePostgres(ctx, tx, f.guard(), resource, token)
}

// AdmitMySQL is the package-level AdmitMySQL on the fence table f.
func (f Fence) AdmitMySQL(ctx context.Context, tx SQLDBTX, resource string, token Token) error {
	if resource == "" {
		return fmt.Errorf("%w: empty resource", ErrInvalidGuard)
	}
	return WriteMySQL(ctx, tx, f.guard(), resource, token)
}
