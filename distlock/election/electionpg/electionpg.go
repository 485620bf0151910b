package electionpg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock/election"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
)

// DBTX is what Board needs of a database handle: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx.
type DBTX = fencedpg.DBTX

// DefaultTable is the board's table in the toolkit migrations.
const DefaultTable = "concurkit_elections"

// Board is an election.Board on a PostgreSQL table with the columns of
// DefaultTable's: name (the primary key), term (bigint, the fencing
// token), value (text) and vacated (boolean). It is safe for concurrent
// use.
type Board struct {
	db    DBTX
	table fenced.Table
	read  string
}

var _ election.Board = (*Board)(nil)

// NewBoard returns a Board on db. table is the board's table, optionally
// schema-qualified ("schema.table"); "" means DefaultTable in the
// connection's search_path. A nil db (also a typed nil) or a bad table
// name is an error matching concurkit.ErrInvalidArgument.
func NewBoard(db DBTX, table string) (*Board, error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%w: electionpg: nil db", concurkit.ErrInvalidArgument)
	}
	t := fenced.Table{Name: DefaultTable, KeyColumn: "name", TokenColumn: "term"}
	parts := []string{t.Name}
	if table != "" {
		parts = strings.Split(table, ".")
		if len(parts) > 2 {
			return nil, fmt.Errorf("%w: electionpg: table %q: at most schema.table", concurkit.ErrInvalidArgument, table)
		}
		t.Name = parts[len(parts)-1]
		if len(parts) == 2 {
			t.Schema = parts[0]
		}
	}
	q, err := ident.Postgres(parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: electionpg: table %q: %w", concurkit.ErrInvalidArgument, table, err)
	}
	return &Board{db: db, table: t, read: fmt.Sprintf(readLeader, q)}, nil
}

// readLeader reads an election's row (%s: the quoted table).
const readLeader = `SELECT term, value, vacated FROM %s WHERE name = $1`

// Proclaim records term and value as election's leader (vacated false),
// refusing a term below the row's with fenced.ErrStaleToken.
func (b *Board) Proclaim(ctx context.Context, name string, term fenced.Token, value string) error {
	return fencedpg.Write(ctx, b.db, b.table, name, term, map[string]any{"value": value, "vacated": false})
}

// Vacate marks term's leadership of election ended, refusing a stale term
// with fenced.ErrStaleToken (and a never-proclaimed election with
// fenced.ErrNotFound).
func (b *Board) Vacate(ctx context.Context, name string, term fenced.Token) error {
	return fencedpg.Update(ctx, b.db, b.table, name, term, map[string]any{"vacated": true})
}

// Leader returns election's row, or election.ErrNoLeader when it has
// none.
func (b *Board) Leader(ctx context.Context, name string) (election.Leader, error) {
	var (
		l    election.Leader
		term int64
	)
	err := b.db.QueryRow(ctx, b.read, name).Scan(&term, &l.Value, &l.Vacated)
	if errors.Is(err, pgx.ErrNoRows) {
		return election.Leader{}, election.ErrNoLeader
	}
	if err != nil {
		return election.Leader{}, fmt.Errorf("electionpg: read leader of %q: %w", name, err)
	}
	l.Term = fenced.Token(term)
	return l, nil
}
