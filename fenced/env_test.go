package fenced_test

// Temporary server access until internal/testenv lands (then these three
// functions delegate to it).

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func pgPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	url := env("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable")
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("fenced_%d", rand.Int64())
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Skipf("postgres unreachable (%v): run scripts/services.sh up", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	})
	return pool
}

func myDB(t testing.TB) *sql.DB {
	t.Helper()
	dsn := env("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/")
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("fenced_%d", rand.Uint32())
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Skipf("mysql unreachable (%v): run scripts/services.sh up", err)
	}
	db, err := sql.Open("mysql", dsn+name+"?parseTime=true&multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		_, _ = admin.Exec("DROP DATABASE " + name)
		admin.Close()
	})
	return db
}

func ddb(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	tr := &http.Transport{}
	c := dynamodb.New(dynamodb.Options{
		BaseEndpoint:     aws.String(env("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("x", "x", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Transport: tr},
	})
	t.Cleanup(tr.CloseIdleConnections)
	return c, fmt.Sprintf("fenced%d_", rand.Uint32())
}
