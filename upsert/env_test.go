package upsert_test

// TEMPORARY stand-in for internal/testenv (being written by helper-1): same
// function shapes, so switching is a rename. Delete once testenv lands.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func uniq() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "t_" + hex.EncodeToString(b)
}

func tePostgresURL(t testing.TB) string {
	t.Helper()
	base := envOr("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable")
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	schema := uniq()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a, err := pgxpool.New(context.Background(), base)
		if err == nil {
			a.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			a.Close()
		}
	})
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func tePostgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), tePostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func teMySQLDSN(t testing.TB) string {
	t.Helper()
	base := envOr("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/")
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := uniq()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("mysql", cfg.FormatDSN())
		if err == nil {
			a.Exec("DROP DATABASE " + name)
			a.Close()
		}
	})
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.MultiStatements = true
	return cfg.FormatDSN()
}

func teMySQL(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", teMySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func teDynamoDB(t testing.TB) (*dynamodb.Client, string) {
	c := dynamodb.New(dynamodb.Options{
		BaseEndpoint:     aws.String(envOr("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("x", "x", ""),
		RetryMaxAttempts: 1,
	})
	return c, fmt.Sprintf("%s_", uniq())
}
