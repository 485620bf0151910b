package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/migrations"
)

// A run's scope is its own namespace in a SQL database: a schema named
// after the run on PostgreSQL, a database named after the run on MySQL.
// The workloads whose stores need the toolkit's tables create them there
// from the toolkit's own migration files, so the tables are exactly the
// ones the stores are built for, and teardown drops the scope whole.
const (
	pgCreateScope    = `CREATE SCHEMA %[1]s; SET search_path TO %[1]s`
	pgDropScope      = `DROP SCHEMA IF EXISTS %[1]s CASCADE`
	mysqlCreateScope = "CREATE DATABASE `%[1]s`"
	mysqlDropScope   = "DROP DATABASE IF EXISTS `%[1]s`"
)

// createScope creates e.Run's scope on system ("postgres" or "mysql"),
// runs the toolkit migration files named (from migrations.FS) in it, then
// the statements extra, each formatted with the run's name as %[1]s.
func createScope(ctx context.Context, e *env, system string, files []string, extra ...string) error {
	d := migrations.Postgres
	if system == "mysql" {
		d = migrations.MySQL
	}
	m, err := migrations.FS(d)
	if err != nil {
		return err
	}
	var stmts []string
	for _, f := range files {
		b, err := fs.ReadFile(m, f)
		if err != nil {
			return fmt.Errorf("chaos: toolkit migration: %w", err)
		}
		stmts = append(stmts, string(b))
	}
	for _, x := range extra {
		stmts = append(stmts, fmt.Sprintf(x, e.Run))
	}
	switch system {
	case "postgres":
		conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
		if err != nil {
			return fmt.Errorf("chaos: postgres: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		// One connection: the search_path set with the schema holds for
		// the migrations.
		for _, q := range append([]string{fmt.Sprintf(pgCreateScope, e.Run)}, stmts...) {
			if _, err := conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("chaos: create the run's schema: %w", err)
			}
		}
		return nil
	case "mysql":
		if err := mysqlExec(ctx, e, "", fmt.Sprintf(mysqlCreateScope, e.Run)); err != nil {
			return fmt.Errorf("chaos: create the run's database: %w", err)
		}
		if err := mysqlExec(ctx, e, e.Run, stmts...); err != nil {
			return fmt.Errorf("chaos: create the run's tables: %w", err)
		}
		return nil
	}
	return fmt.Errorf("chaos: no scope on %q", system)
}

// dropScope drops e.Run's scope on system, and everything in it.
func dropScope(ctx context.Context, e *env, system string) error {
	switch system {
	case "postgres":
		conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, fmt.Sprintf(pgDropScope, e.Run))
		return err
	case "mysql":
		return mysqlExec(ctx, e, "", fmt.Sprintf(mysqlDropScope, e.Run))
	}
	return fmt.Errorf("chaos: no scope on %q", system)
}

// mysqlExec runs stmts on database db ("": none) of e's MySQL server.
func mysqlExec(ctx context.Context, e *env, db string, stmts ...string) error {
	cfg, err := mysql.ParseDSN(e.Endpoints.MySQL)
	if err != nil {
		return fmt.Errorf("chaos: mysql dsn: %w", err)
	}
	cfg.DBName = db
	cfg.MultiStatements = true // a migration file holds several
	mysqlOptions{}.apply(cfg, opTimeout(e.TTL))
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("chaos: mysql dsn: %w", err)
	}
	h := sql.OpenDB(c)
	var errs []error
	for _, q := range stmts {
		if _, err := h.ExecContext(ctx, q); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(append(errs, h.Close())...)
}
