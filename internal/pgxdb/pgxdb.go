// Package pgxdb defines, once, the pgx v5 handle interfaces the PostgreSQL
// adapters accept. The adapters re-export them as type aliases (DBTX,
// Beginner) with their own documentation, so a handle that fits one adapter
// fits them all.
package pgxdb

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBTX is the pgx v5 query interface (the shape of sqlc's DBTX):
// *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy it.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts pgx transactions, in pgx's own shape (the db of
// pgx.BeginFunc): *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn begin a
// transaction, and pgx.Tx begins a pseudo-nested one (a savepoint), so a
// helper that takes a Beginner also works inside a transaction the caller
// opened.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// TxBeginner starts pgx transactions with options (isolation level):
// *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn satisfy it; pgx.Tx does not.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

var (
	_ DBTX     = (*pgxpool.Pool)(nil)
	_ DBTX     = (*pgxpool.Conn)(nil)
	_ DBTX     = (*pgx.Conn)(nil)
	_ DBTX     = pgx.Tx(nil)
	_ Beginner = (*pgxpool.Pool)(nil)
	_ Beginner = (*pgxpool.Conn)(nil)
	_ Beginner = (*pgx.Conn)(nil)
	_ Beginner = pgx.Tx(nil)

	_ TxBeginner = (*pgxpool.Pool)(nil)
	_ TxBeginner = (*pgxpool.Conn)(nil)
	_ TxBeginner = (*pgx.Conn)(nil)
)
