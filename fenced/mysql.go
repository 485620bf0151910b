package fenced

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

// SQLDBTX is the part of a database/sql *DB, *Conn or *Tx that the MySQL
// and MariaDB functions use.
type SQLDBTX = sqldb.DBTX

// SQL templates; %[n]s are quoted identifiers, never values.
const (
	// myUpsert: on a duplicate key every assignment is guarded by
	// IF(token <= new token, new, old); the token column is assigned last
	// because MySQL evaluates the assignments left to right and later ones
	// see earlier results.
	myUpsert = "INSERT INTO %[1]s (%[2]s, %[3]s%[4]s) VALUES (?, ?%[5]s) ON DUPLICATE KEY UPDATE %[6]s%[3]s = IF(%[3]s <= VALUES(%[3]s), VALUES(%[3]s), %[3]s)"
	myUpdate = "UPDATE %[1]s SET %[4]s%[3]s = ? WHERE %[2]s = ? AND %[3]s <= ?"
	// myReadToken must be a locking (current) read: the guarded statement
	// compared the token with the newest committed row, and so must the
	// read that interprets its outcome. A plain SELECT inside a REPEATABLE
	// READ transaction reads the transaction's snapshot, which can still
	// show the caller's own older token after a successor committed a
	// higher one: "unchanged, token equal" would then report a rejected
	// write as accepted.
	myReadToken = "SELECT %[3]s FROM %[1]s WHERE %[2]s = ? LOCK IN SHARE MODE"
	myNextval   = "SELECT NEXTVAL(%s)"
	myCreateSeq = "CREATE SEQUENCE IF NOT EXISTS %s START WITH 1 MINVALUE 1 INCREMENT BY 1"
)

// WriteMySQL is WritePostgres for MySQL/MariaDB (INSERT … ON DUPLICATE KEY
// UPDATE with every assignment guarded by IF()), with the same results.
//
// MySQL's affected-row count tells an accepted update (2) apart, but not
// an insert from a rejected write under clientFoundRows (both 1), nor a
// rejected write from an equal token rewriting identical values (both 0).
// In those cases a second query, a locking read that sees the newest
// committed row even inside an older REPEATABLE READ snapshot, reads the
// row's token: equal means the write was accepted, higher means
// ErrStaleToken. The stored token never decreases, so a rejected write is
// never reported as accepted; an insert overtaken by a successor between
// the two queries is reported as ErrStaleToken, which is what it
// effectively is. An accepted update of an existing row is one round trip.
//
// Cancellation: given a *sql.DB (autocommit), a statement still running
// when ctx ends — typically queued behind a row lock — is stopped on the
// server (KILL QUERY from another pooled connection) before WriteMySQL
// returns, so a cancelled write did not happen; if that cannot be
// confirmed within a few seconds the error is a *AmbiguousCommitError. In
// a *sql.Tx the driver drops the connection and the server rolls the
// transaction back, so the write can never commit. On a *sql.Conn a call
// cut short by ctx returns *AmbiguousCommitError (no second connection to
// stop the statement from). The error matches ctx.Err() in every case.
func WriteMySQL(ctx context.Context, db SQLDBTX, g Guard, key any, token Token, set ...Set) error {
	q, args, err := myPrepare(db, g, key, token, set)
	if err != nil {
		return err
	}
	var cols, params, assign strings.Builder
	for _, c := range q.columns {
		fmt.Fprintf(&cols, ", %s", c)
		params.WriteString(", ?")
		fmt.Fprintf(&assign, "%[1]s = IF(%[2]s <= VALUES(%[2]s), VALUES(%[1]s), %[1]s), ", c, q.token)
	}
	stmt := fmt.Sprintf(myUpsert, q.table, q.key, q.token, cols.String(), params.String(), assign.String())
	res, err := mysqlcancel.Exec(ctx, db, stmt, append([]any{key, int64(token)}, args...)...)
	if err != nil {
		return fmt.Errorf("fenced: guarded write: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fenced: guarded write: %w", err)
	}
	if n == 2 { // an existing row was updated: the guard passed
		return nil
	}
	// 1 is an insert, or (with clientFoundRows) a row left unchanged by a
	// false guard; 0 is a row left unchanged without clientFoundRows.
	return myCheckUnchanged(ctx, db, q, key, token)
}

// UpdateMySQL is UpdatePostgres for MySQL/MariaDB, with the same results.
// As with WriteMySQL, a write that changed nothing costs a second query (a
// locking read), an accepted one is one round trip, and cancellation
// stops the statement on the server or reports *AmbiguousCommitError.
func UpdateMySQL(ctx context.Context, db SQLDBTX, g Guard, key any, token Token, set ...Set) error {
	q, args, err := myPrepare(db, g, key, token, set)
	if err != nil {
		return err
	}
	var assign strings.Builder
	for _, c := range q.columns {
		fmt.Fprintf(&assign, "%s = ?, ", c)
	}
	args = append(args, int64(token), key, int64(token))
	res, err := mysqlcancel.Exec(ctx, db, fmt.Sprintf(myUpdate, q.table, q.key, q.token, assign.String()), args...)
	if err != nil {
		return fmt.Errorf("fenced: guarded update: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fenced: guarded update: %w", err)
	}
	if n > 0 {
		return nil
	}
	return myCheckUnchanged(ctx, db, q, key, token)
}

func myCheckUnchanged(ctx context.Context, db SQLDBTX, q quoted, key any, token Token) error {
	var stored int64
	err := db.QueryRowContext(ctx, fmt.Sprintf(myReadToken, q.table, q.key, q.token), key).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: key %v", ErrNotFound, key)
	case err != nil:
		return fmt.Errorf("fenced: read token after unchanged write: %w", err)
	}
	return staleOrSame(Token(stored), token)
}

// myPrepare checks the arguments and returns the quoted names and the
// values of set.
func myPrepare(db SQLDBTX, g Guard, key any, token Token, set []Set) (quoted, []any, error) {
	if handle.IsNil(db) {
		return quoted{}, nil, ErrNilHandle
	}
	return g.prepare(token, set, ident.MySQL)
}

// MySQLSequence is a Source backed by a MariaDB SEQUENCE object (MariaDB
// 10.3+): Next returns NEXTVAL(seq). A sequence is server-wide and never
// rolled back, and its cache lives in the server, so values are strictly
// increasing across connections in the order of the calls (a restart only
// skips the cached range). MySQL has no SEQUENCE objects; this source
// requires MariaDB. Create it with NewMySQLSequence.
type MySQLSequence struct {
	db   SQLDBTX
	name string // quoted
}

var _ Source = (*MySQLSequence)(nil)

// NewMySQLSequence returns a Source that calls NEXTVAL on the sequence
// name (optionally qualified as two parts: database, name; no parts means
// DefaultSequence in the connection's database). It does not touch the
// database; see CreateMySQLSequence. It returns ErrNilHandle for a nil db
// and ErrInvalidGuard for an invalid name.
func NewMySQLSequence(db SQLDBTX, name ...string) (*MySQLSequence, error) {
	if handle.IsNil(db) {
		return nil, ErrNilHandle
	}
	q, err := seqName(ident.MySQL, name)
	if err != nil {
		return nil, err
	}
	return &MySQLSequence{db: db, name: q}, nil
}

// Next returns the sequence's next value, driver errors wrapped, and
// ErrTokenOverflow once the sequence has passed its MAXVALUE.
func (s *MySQLSequence) Next(ctx context.Context) (Token, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, fmt.Sprintf(myNextval, s.name)).Scan(&v); err != nil {
		if mysqlerr.Number(err) == sqlerr.MariaDBSequenceRunOut {
			return 0, fmt.Errorf("%w: NEXTVAL(%s): %w", ErrTokenOverflow, s.name, err)
		}
		return 0, fmt.Errorf("fenced: NEXTVAL(%s): %w", s.name, err)
	}
	return checked(v)
}

// CreateMySQLSequence creates the MariaDB sequence (same naming as
// NewMySQLSequence) if it does not exist, starting at 1.
func CreateMySQLSequence(ctx context.Context, db SQLDBTX, name ...string) error {
	if handle.IsNil(db) {
		return ErrNilHandle
	}
	q, err := seqName(ident.MySQL, name)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf(myCreateSeq, q)); err != nil {
		return fmt.Errorf("fenced: create sequence %s: %w", q, err)
	}
	return nil
}
