package upsertpg_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertpg"
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

var accounts = upsert.Table{Name: "accounts", KeyColumn: "email"}

func ExampleInsert() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	created, err := upsertpg.Insert(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Ada"})
	fmt.Println(created, err)
	// The second insert of the key changes nothing.
	created, err = upsertpg.Insert(ctx, conn, accounts, map[string]any{"email": "ada@example.com", "name": "Impostor"})
	fmt.Println(created, err)
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleUpsert() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	var name, plan string
	for _, p := range []string{"free", "pro"} {
		created, err := upsertpg.Upsert(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": "Ada", "plan": p},
			[]string{"name", "plan"}, &name, &plan)
		fmt.Println(created, name, plan, err)
	}
	// Output:
	// true Ada free <nil>
	// false Ada pro <nil>
}

func ExampleInsertOrGet() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	var name string
	for _, n := range []string{"Ada", "Impostor"} {
		created, err := upsertpg.InsertOrGet(ctx, conn, accounts,
			map[string]any{"email": "ada@example.com", "name": n},
			[]string{"name"}, &name)
		fmt.Println(created, name, err)
	}
	// Output:
	// true Ada <nil>
	// false Ada <nil>
}
