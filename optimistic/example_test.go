package optimistic_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/retry"
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

// examplePostgres opens one connection holding a temporary inventory table
// with item 1 (stock 10, version 1).
func examplePostgres(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, exampleEnv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, `CREATE TEMPORARY TABLE inventory (id bigint PRIMARY KEY, sku text NOT NULL, stock integer NOT NULL, version bigint NOT NULL DEFAULT 1);
INSERT INTO inventory (id, sku, stock) VALUES (1, 'apple', 10)`)
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// exampleMySQL opens one connection holding a temporary counters table with
// counter 1 (value 0, version 1).
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
			"CREATE TEMPORARY TABLE counters (id BIGINT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB",
			"INSERT INTO counters (id) VALUES (1)",
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

// exampleDynamoDB creates a uniquely named table with item id=1
// (stock 10, version 1) and returns a function that deletes it.
func exampleDynamoDB(ctx context.Context) (*dynamodb.Client, string, func(), error) {
	client := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(exampleEnv("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("x", "x", ""),
	})
	b := make([]byte, 6)
	rand.Read(b)
	name := "example-inventory-" + hex.EncodeToString(b)
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return nil, "", nil, err
	}
	drop := func() {
		client.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
	_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberN{Value: "1"}, "stock": &types.AttributeValueMemberN{Value: "10"}, "version": &types.AttributeValueMemberN{Value: "1"},
	}})
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	return client, name, drop, nil
}

func ExampleUpdatePostgres() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	inventory := optimistic.Table{Name: "inventory", Key: "id", Version: "version"}
	// Item 1 is at version 1: the CAS succeeds and returns version 2.
	v, err := optimistic.UpdatePostgres(ctx, conn, inventory, 1, 1, map[string]any{"stock": 9})
	fmt.Println(v, err)
	// Version 1 is stale now.
	_, err = optimistic.UpdatePostgres(ctx, conn, inventory, 1, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrConflict))
	// No item 2 at all.
	_, err = optimistic.UpdatePostgres(ctx, conn, inventory, 2, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrNotFound), errors.Is(err, sql.ErrNoRows))
	// Output:
	// 2 <nil>
	// true
	// true true
}

func ExampleUpdateMySQL() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()

	counters := optimistic.Table{Name: "counters", Key: "id", Version: "version"}
	v, err := optimistic.UpdateMySQL(ctx, conn, counters, 1, 1, map[string]any{"value": 1})
	fmt.Println(v, err)
	_, err = optimistic.UpdateMySQL(ctx, conn, counters, 1, 1, map[string]any{"value": 1})
	fmt.Println(errors.Is(err, optimistic.ErrConflict))
	_, err = optimistic.UpdateMySQL(ctx, conn, counters, 2, 1, nil)
	fmt.Println(errors.Is(err, optimistic.ErrNotFound))
	// Output:
	// 2 <nil>
	// true
	// true
}

func ExampleUpdateDynamoDB() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	inventory := optimistic.Table{Name: table, Key: "id", Version: "version"}
	v, err := optimistic.UpdateDynamoDB(ctx, client, inventory, 1, 1, map[string]any{"stock": 9})
	fmt.Println(v, err)
	_, err = optimistic.UpdateDynamoDB(ctx, client, inventory, 1, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrConflict))
	_, err = optimistic.UpdateDynamoDB(ctx, client, inventory, 2, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrNotFound))
	// Output:
	// 2 <nil>
	// true
	// true
}

// ExampleDo buys one unit: read stock and version, refuse when sold out,
// otherwise CAS the decrement; a conflict re-runs the whole closure.
func ExampleDo() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	inventory := optimistic.Table{Name: "inventory", Key: "id", Version: "version"}
	errSoldOut := errors.New("sold out")
	buy := func(ctx context.Context) error {
		var stock, version int64
		if err := conn.QueryRow(ctx, "SELECT stock, version FROM inventory WHERE id = $1", 1).Scan(&stock, &version); err != nil {
			return err
		}
		if stock == 0 {
			return errSoldOut // not retryable: Do returns it at once
		}
		_, err := optimistic.UpdatePostgres(ctx, conn, inventory, 1, version, map[string]any{"stock": stock - 1})
		return err // ErrConflict is retryable
	}
	err = optimistic.Do(ctx, retry.Policy{}, buy)
	fmt.Println(err)
	var stock int
	conn.QueryRow(ctx, "SELECT stock FROM inventory WHERE id = 1").Scan(&stock)
	fmt.Println(stock)
	// Output:
	// <nil>
	// 9
}

// ExampleDoValue increments a counter and returns the version it wrote.
func ExampleDoValue() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()

	counters := optimistic.Table{Name: "counters", Key: "id", Version: "version"}
	increment := func(ctx context.Context) (int64, error) {
		var value, version int64
		if err := conn.QueryRowContext(ctx, "SELECT value, version FROM counters WHERE id = ?", 1).Scan(&value, &version); err != nil {
			return 0, err
		}
		return optimistic.UpdateMySQL(ctx, conn, counters, 1, version, map[string]any{"value": value + 1})
	}
	for range 3 {
		v, err := optimistic.DoValue(ctx, retry.Policy{MaxAttempts: 20}, increment)
		fmt.Println(v, err)
	}
	// Output:
	// 2 <nil>
	// 3 <nil>
	// 4 <nil>
}

// ExampleUpdateMySQL_cancelled shows what a deadline means for a CAS on a
// *sql.DB that waits behind another transaction's lock: UpdateMySQL stops
// the statement on the server before it returns, so the caller can rely on
// "not updated" — unless the error is an *AmbiguousCommitError, whose
// outcome could not be confirmed and must be checked by reading the row.
func ExampleUpdateMySQL_cancelled() {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(exampleEnv("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	// Two connections must see the table: a real one, uniquely named.
	b := make([]byte, 6)
	rand.Read(b)
	tbl := optimistic.Table{Schema: "concurkit_examples", Name: "cancelled_" + hex.EncodeToString(b), Key: "id", Version: "version"}
	name := tbl.Schema + "." + tbl.Name
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS concurkit_examples",
		"CREATE TABLE " + name + " (id BIGINT PRIMARY KEY, stock INT NOT NULL, version BIGINT NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			fmt.Println(err)
			return
		}
	}
	defer db.ExecContext(ctx, "DROP TABLE "+name)
	if _, err := db.ExecContext(ctx, "INSERT INTO "+name+" VALUES (1, 10, 1)"); err != nil {
		fmt.Println(err)
		return
	}

	// Another transaction holds the row.
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := holder.ExecContext(ctx, "SELECT 1 FROM "+name+" WHERE id = 1 FOR UPDATE"); err != nil {
		fmt.Println(err)
		return
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = optimistic.UpdateMySQL(short, db, tbl, 1, 1, map[string]any{"stock": 9})
	var amb *optimistic.AmbiguousCommitError
	fmt.Println("deadline:", errors.Is(err, context.DeadlineExceeded), "outcome unknown:", errors.As(err, &amb))

	// The holder lets go: the abandoned CAS does not run after all.
	holder.Commit()
	var stock, version int
	db.QueryRowContext(ctx, "SELECT stock, version FROM "+name+" WHERE id = 1").Scan(&stock, &version)
	fmt.Println(stock, version)
	// Output:
	// deadline: true outcome unknown: false
	// 10 1
}
