package fenced_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
)

// env reads a variable for the Examples, which cannot use testkit.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func pgPool(t testing.TB) *pgxpool.Pool { return testkit.Postgres(t) }

func myDB(t testing.TB) *sql.DB { return testkit.MySQL(t) }

func ddb(t testing.TB) (*dynamodb.Client, string) { return testkit.DynamoDB(t) }
