package optimisticpg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
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

func ExampleUpdate() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	inventory := optimistic.Table{Name: "inventory", KeyColumn: "id", VersionColumn: "version"}
	// Item 1 is at version 1: the CAS succeeds and returns version 2.
	v, err := optimisticpg.Update(ctx, conn, inventory, 1, 1, map[string]any{"stock": 9})
	fmt.Println(v, err)
	// Version 1 is stale now.
	_, err = optimisticpg.Update(ctx, conn, inventory, 1, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrConflict))
	// No item 2 at all.
	_, err = optimisticpg.Update(ctx, conn, inventory, 2, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrNotFound), errors.Is(err, sql.ErrNoRows))
	// Output:
	// 2 <nil>
	// true
	// true true
}
