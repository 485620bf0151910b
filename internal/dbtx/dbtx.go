package dbtx

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the pgx v5 query interface: *pgxpool.Pool, *pgxpool.Conn,
// *pgx.Conn and pgx.Tx satisfy it.
type Postgres interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SQL is the database/sql query interface: *sql.DB, *sql.Conn and *sql.Tx
// satisfy it.
type SQL interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Postgres = (*pgxpool.Pool)(nil)
	_ Postgres = (*pgxpool.Conn)(nil)
	_ Postgres = (*pgx.Conn)(nil)
	_ Postgres = pgx.Tx(nil)
	_ SQL      = (*sql.DB)(nil)
	_ SQL      = (*sql.Conn)(nil)
	_ SQL      = (*sql.Tx)(nil)
)
