package fencedpg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
)

// DBTX is the part of a pgx v5 pool, connection or transaction that the
// package uses: *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy
// it. It is the same interface as every other concurkit PostgreSQL
// adapter's DBTX.
type DBTX = pgxdb.DBTX

var (
	_ DBTX = (*pgxpool.Pool)(nil)
	_ DBTX = (*pgx.Conn)(nil)
	_ DBTX = pgx.Tx(nil)
)

const pkg = "fencedpg"

// SQL templates; %[n]s are quoted identifiers, never values.
const (
	// pgUpsert inserts the row or, if the key exists, updates it only when
	// the stored token is not higher than ours. %[4]s and %[5]s list the
	// version column (value 1) and the assigned columns ($3, …), %[6]s
	// their updates (version + 1, EXCLUDED values).
	pgUpsert = `INSERT INTO %[1]s AS t (%[2]s, %[3]s%[4]s) VALUES ($1, $2%[5]s)
ON CONFLICT (%[2]s) DO UPDATE SET %[3]s = EXCLUDED.%[3]s%[6]s
WHERE t.%[3]s <= EXCLUDED.%[3]s`
	// pgUpdate: %[4]s is the version increment and the assignments.
	pgUpdate    = `UPDATE %[1]s SET %[3]s = $2%[4]s WHERE %[2]s = $1 AND %[3]s <= $2`
	pgReadToken = `SELECT %[3]s FROM %[1]s WHERE %[2]s = $1`
)

// Built statements, per (Table, assigned columns): building and quoting
// cost more than the rest of the client-side work of a call.
var writes, updates guard.Cache

// Write writes the row of table t with primary key key and the assignments
// set (column → value; nil or empty assigns nothing), guarded by token, in
// one statement: it inserts the row if it does not exist, otherwise
// updates it only if the row's token column is ≤ token, and stores token
// in the token column either way. Columns not in set keep their values (or
// get their defaults on insert). With t.VersionColumn set, an accepted
// write also increments the version (an inserted row gets 1).
//
// It returns nil when the write happened (an equal token passes) and
// fenced.ErrStaleToken when the row has seen a higher token (nothing is
// changed; reported to observe.Hooks.FenceRejected). Before any I/O:
// fenced.ErrInvalidToken for token ≤ 0, and errors matching
// concurkit.ErrInvalidArgument for a nil db, a nil key, bad names, or a set
// that assigns the key, token or version column. Driver errors are wrapped
// and match ctx.Err() when ctx ended the call.
func Write(ctx context.Context, db DBTX, t fenced.Table, key any, token fenced.Token, set map[string]any) error {
	st, err := prepare(&writes, buildWrite, db, t, key, token, set)
	if err != nil {
		return err
	}
	return write(ctx, db, st, key, token, set, st.Resource)
}

func write(ctx context.Context, db DBTX, st *guard.Stmt, key any, token fenced.Token, set map[string]any, resource string) error {
	tag, err := db.Exec(ctx, st.SQL, st.Args(set, []any{key, int64(token)})...)
	if err != nil {
		return guard.DriverError(ctx, pkg, "guarded write "+st.Resource, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// PostgreSQL counts matched rows, so 0 means the guard was false.
	return guard.Stale(ctx, pkg, resource, token, 0)
}

// Update updates the existing row of table t with primary key key, guarded
// by token, in one statement (UPDATE … WHERE key = $1 AND token_column <=
// $2), storing token in the token column; with t.VersionColumn set it also
// increments the version. It returns fenced.ErrNotFound (which also matches
// pgx.ErrNoRows and sql.ErrNoRows) when there is no such row and
// fenced.ErrStaleToken when the row has seen a higher token (both found by
// a second query, only on that failure path; the refusal is reported to
// observe.Hooks.FenceRejected with the token seen), and the errors of
// Write otherwise.
//
// When the new values are computed from the row (a read-modify-write),
// read it with SELECT … FOR UPDATE in the transaction tx passed as db, so
// that no compare-and-swap writer changes it in between; see the package
// fenced documentation and ExampleUpdate_withLease.
func Update(ctx context.Context, db DBTX, t fenced.Table, key any, token fenced.Token, set map[string]any) error {
	st, err := prepare(&updates, buildUpdate, db, t, key, token, set)
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, st.SQL, st.Args(set, []any{key, int64(token)})...)
	if err != nil {
		return guard.DriverError(ctx, pkg, "guarded update "+st.Resource, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var stored int64
	err = db.QueryRow(ctx, st.Read, key).Scan(&stored)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s: key %v", fenced.ErrNotFound, st.Resource, key)
	case err != nil:
		return guard.DriverError(ctx, pkg, "read token after refused update of "+st.Resource, err)
	}
	return guard.Stale(ctx, pkg, st.Resource, token, fenced.Token(stored))
}

// prepare checks the arguments and returns the cached statement.
func prepare(c *guard.Cache, build func(fenced.Table, []string) (*guard.Stmt, error), db DBTX, t fenced.Table, key any, token fenced.Token, set map[string]any) (*guard.Stmt, error) {
	if handle.IsNil(db) {
		return nil, guard.Invalid(pkg, "nil db")
	}
	if key == nil {
		return nil, guard.Invalid(pkg, "nil key")
	}
	if err := guard.CheckToken(token); err != nil {
		return nil, err
	}
	return c.Get(t, set, build)
}

func quote(t fenced.Table, cols []string) (guard.Names, guard.Quoted, error) {
	n, err := guard.Resolve(pkg, t, cols)
	if err != nil {
		return n, guard.Quoted{}, err
	}
	q, err := n.Quote(pkg, ident.Postgres)
	return n, q, err
}

func buildWrite(t fenced.Table, cols []string) (*guard.Stmt, error) {
	n, q, err := quote(t, cols)
	if err != nil {
		return nil, err
	}
	var names, params, assign strings.Builder
	if q.Version != "" {
		fmt.Fprintf(&names, ", %s", q.Version)
		params.WriteString(", 1")
		fmt.Fprintf(&assign, ", %[1]s = t.%[1]s + 1", q.Version)
	}
	for i, c := range q.Columns {
		fmt.Fprintf(&names, ", %s", c)
		fmt.Fprintf(&params, ", $%d", i+3)
		fmt.Fprintf(&assign, ", %[1]s = EXCLUDED.%[1]s", c)
	}
	return &guard.Stmt{
		SQL:      fmt.Sprintf(pgUpsert, q.Table, q.Key, q.Token, names.String(), params.String(), assign.String()),
		Columns:  cols,
		Resource: n.Resource(),
	}, nil
}

func buildUpdate(t fenced.Table, cols []string) (*guard.Stmt, error) {
	n, q, err := quote(t, cols)
	if err != nil {
		return nil, err
	}
	var assign strings.Builder
	if q.Version != "" {
		fmt.Fprintf(&assign, ", %[1]s = %[1]s + 1", q.Version)
	}
	for i, c := range q.Columns {
		fmt.Fprintf(&assign, ", %s = $%d", c, i+3)
	}
	return &guard.Stmt{
		SQL:      fmt.Sprintf(pgUpdate, q.Table, q.Key, q.Token, assign.String()),
		Read:     fmt.Sprintf(pgReadToken, q.Table, q.Key, q.Token),
		Columns:  cols,
		Resource: n.Resource(),
	}, nil
}
