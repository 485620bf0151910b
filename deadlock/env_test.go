package deadlock_test

// Interim server access until internal/testenv lands; replaced by
// testenv.Postgres / testenv.MySQL.

import (
	"database/sql"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var schemaSeq atomic.Int64

func testPostgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	schema := fmt.Sprintf("deadlock_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16 // one per replayed transaction plus the monitor
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Skip(err)
	}
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		t.Skip(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(t.Context(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		pool.Close()
	})
	return pool
}

func testMySQL(t testing.TB) *sql.DB {
	t.Helper()
	dsn := os.Getenv("CONCURKIT_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/"
	}
	name := fmt.Sprintf("deadlock_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	root, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.ExecContext(t.Context(), "CREATE DATABASE `"+name+"`"); err != nil {
		t.Skip(err)
	}
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE `" + name + "`")
		db.Close()
	})
	return db
}
