package fenced

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

// DBTX is the part of a pgx v5 pool, connection or transaction that the
// PostgreSQL functions use.
type DBTX = pgxdb.DBTX

// SQL templates; %[n]s are quoted identifiers, never values.
const (
	// pgUpsert inserts the row or, if the key exists, updates it only when
	// the stored token is not higher than ours.
	pgUpsert = `INSERT INTO %[1]s AS t (%[2]s, %[3]s%[4]s) VALUES ($1, $2%[5]s)
ON CONFLICT (%[2]s) DO UPDATE SET %[3]s = EXCLUDED.%[3]s%[6]s
WHERE t.%[3]s <= EXCLUDED.%[3]s`
	pgUpdate    = `UPDATE %[1]s SET %[3]s = $2%[4]s WHERE %[2]s = $1 AND %[3]s <= $2`
	pgReadToken = `SELECT %[3]s FROM %[1]s WHERE %[2]s = $1`
	pgNextval   = `SELECT nextval($1::regclass)`
	pgCreateSeq = `CREATE SEQUENCE IF NOT EXISTS %s AS bigint MINVALUE 1`
)

// WritePostgres writes the row with primary key key and the assignments
// set, guarded by token, in one statement: it inserts the row if it does
// not exist, otherwise updates it only if the row's token column is ≤
// token, and stores token in the token column either way. Columns not in
// set keep their values (or their defaults on insert).
//
// It returns nil when the write happened (an equal token passes),
// ErrStaleToken when the row has seen a higher token (nothing is changed),
// ErrInvalidToken for token ≤ 0, ErrInvalidGuard for bad names, ErrNilHandle
// for a nil db, and driver errors wrapped.
func WritePostgres(ctx context.Context, db DBTX, g Guard, key any, token Token, set ...Set) error {
	q, args, err := pgPrepare(db, g, key, token, set)
	if err != nil {
		return err
	}
	var cols, params, assign strings.Builder
	for i, c := range q.columns {
		fmt.Fprintf(&cols, ", %s", c)
		fmt.Fprintf(&params, ", $%d", i+3)
		fmt.Fprintf(&assign, ", %s = EXCLUDED.%s", c, c)
	}
	sql := fmt.Sprintf(pgUpsert, q.table, q.key, q.token, cols.String(), params.String(), assign.String())
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("fenced: guarded write: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// PostgreSQL counts matched rows, so 0 means the guard was false.
	return fmt.Errorf("%w: token %d", ErrStaleToken, int64(token))
}

// UpdatePostgres updates the existing row with primary key key, guarded by
// token, in one statement (UPDATE … WHERE key = $1 AND token_column <= $2).
// It returns ErrNotFound when there is no such row (found by a second
// query, only on that failure path), ErrStaleToken when the row has seen a
// higher token, and the errors of WritePostgres otherwise.
func UpdatePostgres(ctx context.Context, db DBTX, g Guard, key any, token Token, set ...Set) error {
	q, args, err := pgPrepare(db, g, key, token, set)
	if err != nil {
		return err
	}
	var assign strings.Builder
	for i, c := range q.columns {
		fmt.Fprintf(&assign, ", %s = $%d", c, i+3)
	}
	tag, err := db.Exec(ctx, fmt.Sprintf(pgUpdate, q.table, q.key, q.token, assign.String()), args...)
	if err != nil {
		return fmt.Errorf("fenced: guarded update: %w", err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var stored int64
	err = db.QueryRow(ctx, fmt.Sprintf(pgReadToken, q.table, q.key, q.token), key).Scan(&stored)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: key %v", ErrNotFound, key)
	case err != nil:
		return fmt.Errorf("fenced: read token after rejected update: %w", err)
	}
	return fmt.Errorf("%w: token %d, storage has seen %d", ErrStaleToken, int64(token), stored)
}

func pgPrepare(db DBTX, g Guard, key any, token Token, set []Set) (quoted, []any, error) {
	if handle.IsNil(db) {
		return quoted{}, nil, ErrNilHandle
	}
	q, values, err := g.prepare(token, set, ident.Postgres)
	if err != nil {
		return quoted{}, nil, err
	}
	return q, append([]any{key, int64(token)}, values...), nil
}

// PostgresSequence is a Source backed by a PostgreSQL sequence: Next
// returns nextval, which is strictly increasing across all sessions and
// never rolled back. Create it with NewPostgresSequence.
type PostgresSequence struct {
	db   DBTX
	name string // quoted, possibly schema-qualified
}

var _ Source = (*PostgresSequence)(nil)

// DefaultSequence is the sequence name used when none is given.
const DefaultSequence = "concurkit_fence_token_seq"

// NewPostgresSequence returns a Source that calls nextval on the sequence
// name (optionally schema-qualified as two parts: schema, name; no parts
// means DefaultSequence in the search path). It does not touch the
// database; see CreatePostgresSequence. It returns ErrNilHandle for a nil
// db and ErrInvalidGuard for an invalid name.
func NewPostgresSequence(db DBTX, name ...string) (*PostgresSequence, error) {
	if handle.IsNil(db) {
		return nil, ErrNilHandle
	}
	q, err := seqName(ident.Postgres, name)
	if err != nil {
		return nil, err
	}
	return &PostgresSequence{db: db, name: q}, nil
}

func seqName(q func(...string) (string, error), name []string) (string, error) {
	if len(name) == 0 {
		name = []string{DefaultSequence}
	}
	if len(name) > 2 {
		return "", fmt.Errorf("%w: sequence name has %d parts, want 1 or 2", ErrInvalidGuard, len(name))
	}
	s, err := q(name...)
	if err != nil {
		return "", fmt.Errorf("%w: sequence: %w", ErrInvalidGuard, err)
	}
	return s, nil
}

// Next returns the sequence's next value. It returns driver errors wrapped
// (for example when the sequence does not exist), ErrInvalidToken if the
// sequence yields a value ≤ 0 (it must start at 1 or above) and
// ErrTokenOverflow once it has passed its MAXVALUE.
func (s *PostgresSequence) Next(ctx context.Context) (Token, error) {
	var v int64
	// The quoted name is a bind parameter cast to regclass: the server
	// parses it as an identifier, quoting included.
	if err := s.db.QueryRow(ctx, pgNextval, s.name).Scan(&v); err != nil {
		if sqlerr.SQLState(err) == sqlerr.PGSequenceLimit {
			return 0, fmt.Errorf("%w: nextval(%s): %w", ErrTokenOverflow, s.name, err)
		}
		return 0, fmt.Errorf("fenced: nextval(%s): %w", s.name, err)
	}
	return checked(v)
}

func checked(v int64) (Token, error) {
	t := Token(v)
	if err := checkToken(t); err != nil {
		return 0, err
	}
	return t, nil
}

// CreatePostgresSequence creates the sequence (same naming as
// NewPostgresSequence) if it does not exist, as a bigint starting at 1.
func CreatePostgresSequence(ctx context.Context, db DBTX, name ...string) error {
	if handle.IsNil(db) {
		return ErrNilHandle
	}
	q, err := seqName(ident.Postgres, name)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(pgCreateSeq, q)); err != nil {
		return fmt.Errorf("fenced: create sequence %s: %w", q, err)
	}
	return nil
}
