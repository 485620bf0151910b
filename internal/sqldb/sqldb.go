// Package sqldb defines, once, the database/sql handle interfaces the
// MySQL/MariaDB adapters accept. The adapters re-export them as type
// aliases (DBTX, Beginner) with their own documentation, so a handle that
// fits one adapter fits them all. It imports no driver.
package sqldb

import (
	"context"
	"database/sql"
)

// DBTX is the database/sql query interface: *sql.DB, *sql.Conn and *sql.Tx
// satisfy it.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Beginner starts database/sql transactions: *sql.DB and *sql.Conn satisfy
// it.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

var (
	_ DBTX     = (*sql.DB)(nil)
	_ DBTX     = (*sql.Conn)(nil)
	_ DBTX     = (*sql.Tx)(nil)
	_ Beginner = (*sql.DB)(nil)
	_ Beginner = (*sql.Conn)(nil)
)
