package fencedpg

import (
	"context"
	"fmt"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

const (
	pgNextval   = `SELECT nextval($1::regclass)`
	pgCreateSeq = `CREATE SEQUENCE IF NOT EXISTS %s AS bigint MINVALUE 1`
)

// Sequence is a fenced.Source backed by a PostgreSQL sequence: Next returns
// nextval, which is strictly increasing across all sessions and never
// rolled back. Create it with NewSequence.
type Sequence struct {
	db   DBTX
	name string // quoted, possibly schema-qualified
}

var _ fenced.Source = (*Sequence)(nil)

// NewSequence returns a Source that calls nextval on the sequence name
// (optionally schema-qualified as two parts: schema, name; no parts means
// fenced.DefaultSequence in the search path). It does not touch the
// database; see CreateSequence. Errors match concurkit.ErrInvalidArgument:
// a nil db, an invalid name.
func NewSequence(db DBTX, name ...string) (*Sequence, error) {
	if handle.IsNil(db) {
		return nil, guard.Invalid(pkg, "nil db")
	}
	q, err := seqName(name)
	if err != nil {
		return nil, err
	}
	return &Sequence{db: db, name: q}, nil
}

func seqName(name []string) (string, error) {
	if len(name) == 0 {
		name = []string{fenced.DefaultSequence}
	}
	if len(name) > 2 {
		return "", guard.Invalid(pkg, "sequence name has %d parts, want 1 or 2", len(name))
	}
	s, err := ident.Postgres(name...)
	if err != nil {
		return "", guard.Invalid(pkg, "sequence: %v", err)
	}
	return s, nil
}

// Next returns the sequence's next value. It returns driver errors wrapped
// (for example when the sequence does not exist), fenced.ErrInvalidToken if
// the sequence yields a value ≤ 0 (it must start at 1 or above) and
// fenced.ErrTokenOverflow once it has passed its MAXVALUE. A nil *Sequence
// is an error matching concurkit.ErrInvalidArgument.
func (s *Sequence) Next(ctx context.Context) (fenced.Token, error) {
	if s == nil {
		return 0, guard.Invalid(pkg, "nil Sequence")
	}
	var v int64
	// The quoted name is a bind parameter cast to regclass: the server
	// parses it as an identifier, quoting included.
	if err := s.db.QueryRow(ctx, pgNextval, s.name).Scan(&v); err != nil {
		if sqlerr.SQLState(err) == sqlerr.PGSequenceLimit {
			return 0, fmt.Errorf("%w: nextval(%s): %w", fenced.ErrTokenOverflow, s.name, err)
		}
		return 0, guard.DriverError(ctx, pkg, "nextval("+s.name+")", err)
	}
	return guard.Checked(v)
}

// CreateSequence creates the sequence (same naming as NewSequence) if it
// does not exist, as a bigint starting at 1. Errors: those of NewSequence,
// and driver errors wrapped.
func CreateSequence(ctx context.Context, db DBTX, name ...string) error {
	if handle.IsNil(db) {
		return guard.Invalid(pkg, "nil db")
	}
	q, err := seqName(name)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(pgCreateSeq, q)); err != nil {
		return guard.DriverError(ctx, pkg, "create sequence "+q, err)
	}
	return nil
}
