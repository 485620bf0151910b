package upsertpg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/internal/spec"
)

// DBTX is the pgx v5 query interface the functions need (the shape of
// sqlc's DBTX): *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy
// it, so they run on a pool, a connection or inside a transaction.
type DBTX = pgxdb.DBTX

var (
	_ DBTX = (*pgxpool.Pool)(nil)
	_ DBTX = (*pgxpool.Conn)(nil)
	_ DBTX = (*pgx.Conn)(nil)
	_ DBTX = pgx.Tx(nil)
)

// pkg prefixes this package's errors.
const pkg = "upsertpg"

// Statements. %[1]s table, %[2]s column list, %[3]s placeholders,
// %[4]s key column.
const (
	insertSQL = `INSERT INTO %[1]s (%[2]s) VALUES (%[3]s) ON CONFLICT (%[4]s) DO NOTHING`

	// (xmax = 0) is true for a row version created by this INSERT and false
	// for one written by the DO UPDATE branch, which stamps the row with
	// its own transaction id. %[5]s assignments, %[6]s ", col, …" to return.
	upsertSQL = `INSERT INTO %[1]s (%[2]s) VALUES (%[3]s) ON CONFLICT (%[4]s) DO UPDATE SET %[5]s
RETURNING (xmax = 0)%[6]s`

	// One statement: the CTE inserts or does nothing; the second branch
	// reads the existing row only when the CTE returned nothing. Both
	// branches see the statement's snapshot, which is why the read can come
	// back empty after a conflict with a row committed after the snapshot
	// was taken (READ COMMITTED): the caller runs the statement again.
	// %[5]s returning list (at least one expression), %[6]s key placeholder.
	insertOrGetSQL = `WITH ins AS (
	INSERT INTO %[1]s (%[2]s) VALUES (%[3]s) ON CONFLICT (%[4]s) DO NOTHING RETURNING %[5]s
)
SELECT true, %[5]s FROM ins
UNION ALL
SELECT false, %[5]s FROM %[1]s WHERE %[4]s = %[6]s AND NOT EXISTS (SELECT 1 FROM ins)`
)

func placeholders(n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(i+1)
	}
	return strings.Join(p, ", ")
}

// Insert inserts row (column name → value; it must contain t.KeyColumn)
// unless a row with that key exists, and reports whether it inserted. An
// existing row is left unchanged. One statement (ON CONFLICT DO NOTHING).
//
// Errors: before any I/O, an error matching concurkit.ErrInvalidArgument
// (nil db, invalid names, no key value); otherwise the driver's error
// wrapped as "upsertpg: insert into <table>: …" (matching
// context.Canceled or context.DeadlineExceeded when ctx ended the
// statement; 23505 if another unique key conflicts).
func Insert(ctx context.Context, db DBTX, t upsert.Table, row map[string]any) (created bool, err error) {
	s, err := spec.Validate(pkg, db, "db", t, row, nil, nil)
	if err != nil {
		return false, err
	}
	q, err := s.Quote(pkg, ident.Postgres)
	if err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, insertStatement(q), s.Args(row)...)
	if err != nil {
		return false, spec.DriverError(ctx, pkg, "insert into "+s.Name(), err)
	}
	return tag.RowsAffected() == 1, nil
}

// Upsert inserts row, or, if a row with its key exists, sets that row's
// other columns to row's values; it reports whether it inserted and scans
// the listed columns of the row as stored afterwards into dest (as
// pgx.Row.Scan does; returning may be empty). One statement
// (ON CONFLICT DO UPDATE … RETURNING).
//
// Errors: as Insert (wrapped as "upsertpg: upsert into <table>: …"), plus
// scan errors; returning and dest of different lengths, or a nil dest,
// match concurkit.ErrInvalidArgument.
func Upsert(ctx context.Context, db DBTX, t upsert.Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	s, err := spec.Validate(pkg, db, "db", t, row, returning, dest)
	if err != nil {
		return false, err
	}
	q, err := s.Quote(pkg, ident.Postgres)
	if err != nil {
		return false, err
	}
	if err := db.QueryRow(ctx, upsertStatement(q), s.Args(row)...).Scan(append([]any{&created}, dest...)...); err != nil {
		return false, spec.DriverError(ctx, pkg, "upsert into "+s.Name(), err)
	}
	return created, nil
}

// InsertOrGet inserts row unless a row with its key exists, and scans the
// listed columns of the row now stored under the key — the new one or the
// existing one, unchanged — into dest; created reports which. Concurrent
// callers with the same key all get the same row and exactly one gets
// created == true.
//
// It is one statement; if the conflicting row was committed after the
// statement's snapshot (READ COMMITTED), the statement is run again, up to
// upsert.MaxReadAttempts times. Inside a REPEATABLE READ or SERIALIZABLE
// transaction that case is a serialization failure (SQLSTATE 40001),
// returned for the caller to retry the transaction.
//
// Errors: as Upsert (wrapped as "upsertpg: insert or get in <table>: …"),
// plus upsert.ErrContended when every attempt found the conflicting row
// gone.
func InsertOrGet(ctx context.Context, db DBTX, t upsert.Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	s, err := spec.Validate(pkg, db, "db", t, row, returning, dest)
	if err != nil {
		return false, err
	}
	q, err := s.Quote(pkg, ident.Postgres)
	if err != nil {
		return false, err
	}
	if len(q.Returning) == 0 {
		dest = []any{new(any)} // the statement returns the key instead
	}
	stmt := insertOrGetStatement(q, s.KeyIndex)
	args := s.Args(row)
	for range upsert.MaxReadAttempts {
		err := db.QueryRow(ctx, stmt, args...).Scan(append([]any{&created}, dest...)...)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // conflicting row invisible to this snapshot (or deleted): again
		}
		if err != nil {
			return false, spec.DriverError(ctx, pkg, "insert or get in "+s.Name(), err)
		}
		return created, nil
	}
	return false, s.Contended()
}

// The statement builders take quoted identifiers; the arguments are the
// row's values in q.Cols order.

func insertStatement(q spec.Quoted) string {
	return fmt.Sprintf(insertSQL, q.Table, strings.Join(q.Cols, ", "), placeholders(len(q.Cols)), q.Key)
}

func upsertStatement(q spec.Quoted) string {
	var set []string
	for _, c := range q.NonKey {
		set = append(set, c+" = EXCLUDED."+c)
	}
	if len(set) == 0 {
		// Nothing to change, but DO UPDATE (unlike DO NOTHING) returns the row.
		set = append(set, q.Key+" = EXCLUDED."+q.Key)
	}
	var ret strings.Builder
	for _, c := range q.Returning {
		ret.WriteString(", " + c)
	}
	return fmt.Sprintf(upsertSQL, q.Table, strings.Join(q.Cols, ", "), placeholders(len(q.Cols)), q.Key, strings.Join(set, ", "), ret.String())
}

// insertOrGetStatement returns (created, returning...) or, with no
// returning columns, (created, key).
func insertOrGetStatement(q spec.Quoted, keyIndex int) string {
	ret := strings.Join(q.Returning, ", ")
	if ret == "" {
		ret = q.Key // RETURNING needs an expression
	}
	return fmt.Sprintf(insertOrGetSQL, q.Table, strings.Join(q.Cols, ", "), placeholders(len(q.Cols)), q.Key, ret, "$"+strconv.Itoa(keyIndex+1))
}
