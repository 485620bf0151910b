package upsert_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/upsert"
)

// The examples connect to the servers of scripts/services.sh (or the
// CONCURKIT_* variables) and work on session-private temporary tables, or a
// uniquely named DynamoDB table, so they can run next to the tests.

func exampleEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// examplePostgres opens one connection holding an empty temporary table
// accounts (email text PRIMARY KEY, name text, plan text).
func examplePostgres(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, exampleEnv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		return nil, err
	}
	if _, err = conn.Exec(ctx, `CREATE TEMPORARY TABLE accounts (email text PRIMARY KEY, name text NOT NULL, plan text NOT NULL DEFAULT 'free')`); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// exampleMySQL is examplePostgres for MariaDB/MySQL.
func exampleMySQL(ctx context.Context) (*sql.DB, *sql.Conn, error) {
	cfg, err := mysql.ParseDSN(exampleEnv("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/"))
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	conn, err := db.Conn(ctx)
	if err == nil {
		for _, stmt := range []string{
			"CREATE DATABASE IF NOT EXISTS concurkit_examples",
			"USE concurkit_examples",
			"CREATE TEMPORARY TABLE accounts (email VARCHAR(255) PRIMARY KEY, name VARCHAR(255) NOT NULL, plan VARCHAR(32) NOT NULL DEFAULT 'free') ENGINE=InnoDB",
		} {
			if _, err = conn.ExecContext(ctx, stmt); err != nil {
				break
			}
		}
	}
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, conn, nil
}

// exampleDynamoDB creates a uniquely named table keyed by the string
// attribute email and returns a function that deletes it.
func exampleDynamoDB(ctx context.Context) (*dynamodb.Client, string, func(), error) {
	client := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(exampleEnv("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("x", "x", ""),
	})
	b := make([]byte, 6)
	rand.Read(b)
	name := "example-accounts-" + hex.EncodeToString(b)
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("email"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("email"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return nil, "", nil, err
	}
	drop := func() {
		client.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
	return client, name, drop, nil
}

var accounts = upsert.Table{Name: "accounts", Key: "email"}

func ExampleInsertPostgres() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	created, err := upsert.InsertPostgres(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Ada"})
	fmt.Println(created, err)
	// The second insert of the key changes nothing.
	created, err = upsert.InsertPostgres(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Impostor"})
	fmt.Println(created, err)
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleUpsertPostgres() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	var name, plan string
	for _, p := range []string{"free", "pro"} {
		created, err := upsert.UpsertPostgres(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": "Ada", "plan": p},
			[]string{"name", "plan"}, &name, &plan)
		fmt.Println(created, name, plan, err)
	}
	// Output:
	// true Ada free <nil>
	// false Ada pro <nil>
}

func ExampleInsertOrGetPostgres() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	var name string
	for _, n := range []string{"Ada", "Impostor"} {
		created, err := upsert.InsertOrGetPostgres(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": n},
			[]string{"name"}, &name)
		fmt.Println(created, name, err)
	}
	// Output:
	// true Ada <nil>
	// false Ada <nil>
}

func ExampleInsertMySQL() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()

	created, err := upsert.InsertMySQL(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Ada"})
	fmt.Println(created, err)
	created, err = upsert.InsertMySQL(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Impostor"})
	fmt.Println(created, err)
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleUpsertMySQL() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()

	var name, plan string
	// The third call changes nothing: MySQL reports 0 affected rows (1 with
	// clientFoundRows), and Upsert still says created == false.
	for _, p := range []string{"free", "pro", "pro"} {
		created, err := upsert.UpsertMySQL(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": "Ada", "plan": p},
			[]string{"name", "plan"}, &name, &plan)
		fmt.Println(created, name, plan, err)
	}
	// Output:
	// true Ada free <nil>
	// false Ada pro <nil>
	// false Ada pro <nil>
}

func ExampleInsertOrGetMySQL() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()

	var name string
	for _, n := range []string{"Ada", "Impostor"} {
		created, err := upsert.InsertOrGetMySQL(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": n},
			[]string{"name"}, &name)
		fmt.Println(created, name, err)
	}
	// Output:
	// true Ada <nil>
	// false Ada <nil>
}

func ExampleInsertDynamoDB() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	t := upsert.Table{Name: table, Key: "email"}
	created, err := upsert.InsertDynamoDB(ctx, client, t, map[string]any{"email": "ada@example.com", "name": "Ada"})
	fmt.Println(created, err)
	created, err = upsert.InsertDynamoDB(ctx, client, t, map[string]any{"email": "ada@example.com", "name": "Impostor"})
	fmt.Println(created, err)
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleUpsertDynamoDB() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	t := upsert.Table{Name: table, Key: "email"}
	for _, p := range []string{"free", "pro"} {
		item, created, err := upsert.UpsertDynamoDB(ctx, client, t, map[string]any{"email": "ada@example.com", "name": "Ada", "plan": p})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(created, item["plan"].(*types.AttributeValueMemberS).Value)
	}
	// Output:
	// true free
	// false pro
}

func ExampleInsertOrGetDynamoDB() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	t := upsert.Table{Name: table, Key: "email"}
	for _, n := range []string{"Ada", "Impostor"} {
		item, created, err := upsert.InsertOrGetDynamoDB(ctx, client, t, map[string]any{"email": "ada@example.com", "name": n})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(created, item["name"].(*types.AttributeValueMemberS).Value)
	}
	// Output:
	// true Ada
	// false Ada
}
