package fenced_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/testenv"
)

// env reads a variable for the Examples, which cannot use testenv.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func pgPool(t testing.TB) *pgxpool.Pool { return testenv.Postgres(t) }

func myDB(t testing.TB) *sql.DB { return testenv.MySQL(t) }

func ddb(t testing.TB) (*dynamodb.Client, string) { return testenv.DynamoDB(t) }
