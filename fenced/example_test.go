package fenced_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/fenced"
)

// The examples connect to the servers of scripts/services.sh (or the
// CONCURKIT_* environment variables) and work in temporary tables.

func examplePostgres(ctx context.Context) *pgx.Conn {
	conn, err := pgx.Connect(ctx, env("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		panic(err) // examples only: the library never panics
	}
	_, err = conn.Exec(ctx, `CREATE TEMP TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL DEFAULT '',
		amount bigint NOT NULL DEFAULT 0, max_seen_token bigint NOT NULL DEFAULT 0);
		CREATE TEMP TABLE concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)`)
	if err != nil {
		panic(err)
	}
	return conn
}

func exampleMySQL(ctx context.Context) (*sql.DB, *sql.Conn) {
	dsn := env("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/")
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		panic(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS concurkit_examples"); err != nil {
		panic(err)
	}
	db, err := sql.Open("mysql", dsn+"concurkit_examples")
	if err != nil {
		panic(err)
	}
	conn, err := db.Conn(ctx) // temporary tables live on one connection
	if err != nil {
		panic(err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE accounts (id BIGINT PRIMARY KEY, owner VARCHAR(64) NOT NULL DEFAULT '', amount BIGINT NOT NULL DEFAULT 0, max_seen_token BIGINT NOT NULL DEFAULT 0)"); err != nil {
		panic(err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE concurkit_fences (resource VARCHAR(255) PRIMARY KEY, max_seen_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"); err != nil {
		panic(err)
	}
	return db, conn
}

// A holder with token 7 writes; its lock is taken over by a holder with
// token 8, who writes; the old holder wakes up and its write is rejected.
func ExampleWritePostgres() {
	ctx := context.Background()
	conn := examplePostgres(ctx)
	defer conn.Close(ctx)
	accounts := fenced.Guard{Table: "accounts"} // key column "id", token column "max_seen_token"

	fmt.Println(fenced.WritePostgres(ctx, conn, accounts, 1, 7, fenced.Set{Column: "owner", Value: "A"}))
	fmt.Println(fenced.WritePostgres(ctx, conn, accounts, 1, 8, fenced.Set{Column: "owner", Value: "B"}))
	err := fenced.WritePostgres(ctx, conn, accounts, 1, 7, fenced.Set{Column: "owner", Value: "A again"})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))

	var owner string
	_ = conn.QueryRow(ctx, "SELECT owner FROM accounts WHERE id = 1").Scan(&owner)
	fmt.Println(owner)
	// Output:
	// <nil>
	// <nil>
	// true
	// B
}

func ExampleUpdatePostgres() {
	ctx := context.Background()
	conn := examplePostgres(ctx)
	defer conn.Close(ctx)
	accounts := fenced.Guard{Table: "accounts"}

	err := fenced.UpdatePostgres(ctx, conn, accounts, 42, 1, fenced.Set{Column: "amount", Value: 10})
	fmt.Println(errors.Is(err, fenced.ErrNotFound))
	_, _ = conn.Exec(ctx, "INSERT INTO accounts (id) VALUES (42)")
	fmt.Println(fenced.UpdatePostgres(ctx, conn, accounts, 42, 3, fenced.Set{Column: "amount", Value: 10}))
	err = fenced.UpdatePostgres(ctx, conn, accounts, 42, 2, fenced.Set{Column: "amount", Value: 99})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	// Output:
	// true
	// <nil>
	// true
}

// Admit guards a side effect outside the database: the e-mail is sent only
// by a holder whose token the fence row admitted in a committed
// transaction.
func ExampleAdmit() {
	ctx := context.Background()
	conn := examplePostgres(ctx)
	defer conn.Close(ctx)

	sendReceipt := func(token fenced.Token) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := fenced.Admit(ctx, tx, "receipt:order-17", token); err != nil {
				return err
			}
			fmt.Println("sending receipt with token", token)
			return nil
		})
	}
	fmt.Println(sendReceipt(12))
	fmt.Println(errors.Is(sendReceipt(11), fenced.ErrStaleToken))
	// Output:
	// sending receipt with token 12
	// <nil>
	// true
}

func ExampleNewPostgresSequence() {
	ctx := context.Background()
	conn := examplePostgres(ctx)
	defer conn.Close(ctx)
	seq := fmt.Sprintf("example_seq_%d", rand.Uint32())
	if err := fenced.CreatePostgresSequence(ctx, conn, "pg_temp", seq); err != nil {
		panic(err)
	}
	src, err := fenced.NewPostgresSequence(conn, "pg_temp", seq)
	if err != nil {
		panic(err)
	}
	a, _ := src.Next(ctx)
	b, _ := src.Next(ctx)
	fmt.Println(a, b)
	// Output: 1 2
}

func ExampleWriteMySQL() {
	ctx := context.Background()
	db, conn := exampleMySQL(ctx)
	defer db.Close()
	defer conn.Close()
	accounts := fenced.Guard{Table: "accounts"}

	fmt.Println(fenced.WriteMySQL(ctx, conn, accounts, 1, 7, fenced.Set{Column: "owner", Value: "A"}))
	fmt.Println(fenced.WriteMySQL(ctx, conn, accounts, 1, 8, fenced.Set{Column: "owner", Value: "B"}))
	err := fenced.WriteMySQL(ctx, conn, accounts, 1, 7, fenced.Set{Column: "owner", Value: "A again"})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	err = fenced.UpdateMySQL(ctx, conn, accounts, 1, 6, fenced.Set{Column: "amount", Value: 5})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	// Output:
	// <nil>
	// <nil>
	// true
	// true
}

func ExampleAdmitMySQL() {
	ctx := context.Background()
	db, conn := exampleMySQL(ctx)
	defer db.Close()
	defer conn.Close()
	admit := func(token fenced.Token) error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fenced.AdmitMySQL(ctx, tx, "webhook:42", token); err != nil {
			return err
		}
		return tx.Commit()
	}
	fmt.Println(admit(3), admit(3), errors.Is(admit(2), fenced.ErrStaleToken))
	// Output: <nil> <nil> true
}

func ExampleNewMySQLSequence() {
	ctx := context.Background()
	db, conn := exampleMySQL(ctx)
	defer db.Close()
	defer conn.Close()
	name := fmt.Sprintf("example_seq_%d", rand.Uint32())
	if err := fenced.CreateMySQLSequence(ctx, conn, name); err != nil {
		panic(err)
	}
	defer conn.ExecContext(ctx, "DROP SEQUENCE "+name)
	src, _ := fenced.NewMySQLSequence(conn, name)
	a, _ := src.Next(ctx)
	b, _ := src.Next(ctx)
	fmt.Println(a, b)
	// Output: 1 2
}

func exampleDynamoDB(ctx context.Context, key string) (*dynamodb.Client, string, func()) {
	tr := &http.Transport{}
	c := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(env("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:       "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
		HTTPClient: &http.Client{Transport: tr},
	})
	table := fmt.Sprintf("example%d", rand.Uint32())
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		panic(err)
	}
	return c, table, func() {
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		tr.CloseIdleConnections()
	}
}

func ExamplePutDynamoDB() {
	ctx := context.Background()
	c, table, cleanup := exampleDynamoDB(ctx, "id")
	defer cleanup()
	orders := fenced.Guard{Table: table} // token attribute "max_seen_token"
	item := func(state string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "order-1"}, "state": &types.AttributeValueMemberS{Value: state}}
	}
	fmt.Println(fenced.PutDynamoDB(ctx, c, orders, item("charged by B"), 8))
	err := fenced.PutDynamoDB(ctx, c, orders, item("charged by A"), 7)
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	// Output:
	// <nil>
	// true
}

func ExampleNewDynamoDBCounter() {
	ctx := context.Background()
	c, table, cleanup := exampleDynamoDB(ctx, fenced.DefaultCounterKey)
	defer cleanup()
	src, err := fenced.NewDynamoDBCounter(c, table, "lock-tokens", nil)
	if err != nil {
		panic(err)
	}
	a, _ := src.Next(ctx)
	b, _ := src.Next(ctx)
	fmt.Println(a, b)
	// Output: 1 2
}
