package upsertmysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertmysql"
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

// exampleMySQL opens one connection holding an empty temporary table
// accounts (email PRIMARY KEY, name, plan).
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

var accounts = upsert.Table{Name: "accounts", KeyColumn: "email"}

func ExampleInsert() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()

	created, err := upsertmysql.Insert(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Ada"})
	fmt.Println(created, err)
	created, err = upsertmysql.Insert(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Impostor"})
	fmt.Println(created, err)
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleUpsert() {
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
		created, err := upsertmysql.Upsert(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": "Ada", "plan": p},
			[]string{"name", "plan"}, &name, &plan)
		fmt.Println(created, name, plan, err)
	}
	// Output:
	// true Ada free <nil>
	// false Ada pro <nil>
	// false Ada pro <nil>
}

func ExampleInsertOrGet() {
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
		created, err := upsertmysql.InsertOrGet(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": n},
			[]string{"name"}, &name)
		fmt.Println(created, name, err)
	}
	// Output:
	// true Ada <nil>
	// false Ada <nil>
}
