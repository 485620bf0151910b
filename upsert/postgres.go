package upsert

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
)

// DBTX is the part of pgx v5 that the PostgreSQL helpers use;
// *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy it.
type DBTX = pgxdb.DBTX

// PostgreSQL statements. %[1]s table, %[2]s column list, %[3]s placeholders,
// %[4]s key column.
const (
	pgInsert = `INSERT INTO %[1]s (%[2]s) VALUES (%[3]s) ON CONFLICT (%[4]s) DO NOTHING`

	// (xmax = 0) is true for a row version created by this INSERT and false
	// for one written by the DO UPDATE branch, which stamps the row with
	// its own transaction id. %[5]s assignments, %[6]s ", col, …" to return.
	pgUpsert = `INSERT INTO %[1]s (%[2]s) VALUES (%[3]s) ON CONFLICT (%[4]s) DO UPDATE SET %[5]s
RETURNING (xmax = 0)%[6]s`

	// One statement: the CTE inserts or does nothing; the second branch
	// reads the existing row only when the CTE returned nothing. Both
	// branches see the statement's snapshot, which is why the read can come
	// back empty after a conflict with a row committed after the snapshot
	// was taken (READ COMMITTED): the caller runs the statement again.
	// %[5]s returning list (at least one expression), %[6]s key placeholder.
	pgInsertOrGet = `WITH ins AS (
	INSERT INTO %[1]s (%[2]s) VALUES (%[3]s) ON CONFLICT (%[4]s) DO NOTHING RETURNING %[5]s
)
SELECT true, %[5]s FROM ins
UNION ALL
SELECT false, %[5]s FROM %[1]s WHERE %[4]s = %[6]s AND NOT EXISTS (SELECT 1 FROM ins)`
)

func pgPlaceholders(n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(i+1)
	}
	return strings.Join(p, ", ")
}

// InsertPostgres inserts row (column name → value; it must contain t.Key)
// unless a row with that key exists, and reports whether it inserted. An
// existing row is left unchanged. One statement (ON CONFLICT DO NOTHING).
//
// Errors: ErrInvalidArgument before any I/O (nil db, invalid names, no key
// value), or the driver's error (matching context.Canceled or
// context.DeadlineExceeded when ctx ended the statement; 23505 if another
// unique key conflicts).
func InsertPostgres(ctx context.Context, db DBTX, t Table, row map[string]any) (created bool, err error) {
	s, err := t.validate(db, row, nil, nil)
	if err != nil {
		return false, err
	}
	q, err := t.quote(ident.Postgres, s)
	if err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, pgInsertStatement(q), s.args(row)...)
	if err != nil {
		return false, driverError(ctx, "insert into "+q.table, err)
	}
	return tag.RowsAffected() == 1, nil
}

// UpsertPostgres inserts row, or, if a row with its key exists, sets that
// row's other columns to row's values; it reports whether it inserted and
// scans the listed columns of the row as stored afterwards into dest (as
// pgx.Row.Scan does; returning may be empty). One statement
// (ON CONFLICT DO UPDATE … RETURNING).
//
// Errors: as InsertPostgres, plus scan errors.
func UpsertPostgres(ctx context.Context, db DBTX, t Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	s, err := t.validate(db, row, returning, dest)
	if err != nil {
		return false, err
	}
	q, err := t.quote(ident.Postgres, s)
	if err != nil {
		return false, err
	}
	if err := db.QueryRow(ctx, pgUpsertStatement(q), s.args(row)...).Scan(append([]any{&created}, dest...)...); err != nil {
		return false, driverError(ctx, "upsert into "+q.table, err)
	}
	return created, nil
}

// InsertOrGetPostgres inserts row unless a row with its key exists, and
// scans the listed columns of the row now stored under the key — the new
// one or the existing one, unchanged — into dest; created reports which.
// Concurrent callers with the same key all get the same row and exactly one
// gets created == true.
//
// It is one statement; if the conflicting row was committed after the
// statement's snapshot (READ COMMITTED), the statement is run again, up to
// MaxReadAttempts times. Inside a REPEATABLE READ or SERIALIZABLE
// transaction that case is a serialization failure (SQLSTATE 40001),
// returned for the caller to retry the transaction.
//
// Errors: as InsertPostgres, plus ErrContended when every attempt found the
// conflicting row gone, and scan errors.
func InsertOrGetPostgres(ctx context.Context, db DBTX, t Table, row map[string]any, returning []string, dest ...any) (created bool, err error) {
	s, err := t.validate(db, row, returning, dest)
	if err != nil {
		return false, err
	}
	q, err := t.quote(ident.Postgres, s)
	if err != nil {
		return false, err
	}
	if len(q.returning) == 0 {
		dest = []any{new(any)} // the statement returns the key instead
	}
	stmt := pgInsertOrGetStatement(q, s.keyIndex)
	args := s.args(row)
	for range MaxReadAttempts {
		err := db.QueryRow(ctx, stmt, args...).Scan(append([]any{&created}, dest...)...)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // conflicting row invisible to this snapshot (or deleted): again
		}
		if err != nil {
			return false, driverError(ctx, "insert or get in "+q.table, err)
		}
		return created, nil
	}
	return false, fmt.Errorf("%w: %s after %d attempts", ErrContended, q.table, MaxReadAttempts)
}

// The statement builders take quoted identifiers; the arguments are the
// row's values in q.cols order.

func pgInsertStatement(q quoted) string {
	return fmt.Sprintf(pgInsert, q.table, strings.Join(q.cols, ", "), pgPlaceholders(len(q.cols)), q.key)
}

func pgUpsertStatement(q quoted) string {
	var set []string
	for _, c := range q.nonKey {
		set = append(set, c+" = EXCLUDED."+c)
	}
	if len(set) == 0 {
		// Nothing to change, but DO UPDATE (unlike DO NOTHING) returns the row.
		set = append(set, q.key+" = EXCLUDED."+q.key)
	}
	var ret strings.Builder
	for _, c := range q.returning {
		ret.WriteString(", " + c)
	}
	return fmt.Sprintf(pgUpsert, q.table, strings.Join(q.cols, ", "), pgPlaceholders(len(q.cols)), q.key, strings.Join(set, ", "), ret.String())
}

// pgInsertOrGetStatement returns (created, returning...) or, with no
// returning columns, (created, key).
func pgInsertOrGetStatement(q quoted, keyIndex int) string {
	ret := strings.Join(q.returning, ", ")
	if ret == "" {
		ret = q.key // RETURNING needs an expression
	}
	return fmt.Sprintf(pgInsertOrGet, q.table, strings.Join(q.cols, ", "), pgPlaceholders(len(q.cols)), q.key, ret, "$"+strconv.Itoa(keyIndex+1))
}
