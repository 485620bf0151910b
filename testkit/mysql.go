package testkit

import (
	"context"
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/redact"
)

// MySQLMaxOpenConns is the SetMaxOpenConns of the *sql.DB returned here.
const MySQLMaxOpenConns = 100

var mysqlServer = &server{
	name:   "MariaDB/MySQL",
	envVar: "CONCURKIT_MYSQL_DSN",
	def:    "root@tcp(127.0.0.1:13306)/",
	addrs: func(v string) ([]string, error) {
		cfg, err := mysql.ParseDSN(v)
		if err != nil {
			return nil, err
		}
		return []string{cfg.Addr}, nil
	},
	container: mysqlContainer,
}

// MySQLServerDSN returns the DSN of the server itself, without a database
// (no isolation). Prefer MySQLDSN.
func MySQLServerDSN(t testing.TB) string {
	t.Helper()
	return mysqlServer.get(t)
}

// MySQL returns a *sql.DB on a fresh database ck_<random> (see MySQLDSN),
// with SetMaxOpenConns(MySQLMaxOpenConns); closed at cleanup, then the
// database is dropped.
func MySQL(t testing.TB) *sql.DB {
	t.Helper()
	return MySQLFor(t, MySQLDSN(t))
}

// MySQLDSN creates a fresh database ck_<random>, dropped at cleanup, and
// returns a DSN for it with parseTime=true and multiStatements=true.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base := mysqlServer.get(t)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("testenv: parse mysql dsn %s: %v", redact.DSN(base), redact.Error(err, base))
	}
	cfg.DBName = ""
	admin := cfg.FormatDSN()
	db := Name("ck_")

	ctx, cancel := setupContext(t)
	defer cancel()
	if err := mysqlExec(ctx, admin, "CREATE DATABASE `"+db+"`"); err != nil {
		t.Fatalf("testenv: create database %s: %v", db, redact.Error(err, base, admin))
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := mysqlExec(ctx, admin, "SET SESSION lock_wait_timeout = 20; DROP DATABASE IF EXISTS `"+db+"`"); err != nil {
			t.Logf("testenv: drop database %s: %v", db, redact.Error(err, base, admin))
		}
	})

	cfg.DBName = db
	cfg.ParseTime = true
	cfg.MultiStatements = true
	return cfg.FormatDSN()
}

// MySQLFor returns a new, independent *sql.DB for dsn (typically one from
// MySQLDSN) with SetMaxOpenConns(MySQLMaxOpenConns), closed at cleanup.
func MySQLFor(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testenv: open mysql: %v", redact.Error(err, dsn))
	}
	db.SetMaxOpenConns(MySQLMaxOpenConns)
	db.SetMaxIdleConns(16)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := setupContext(t)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("testenv: mysql ping: %v", redact.Error(err, dsn))
	}
	return db
}

// mysqlExec runs query on a short-lived connection.
func mysqlExec(ctx context.Context, dsn, query string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.MultiStatements = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, query)
	return err
}
