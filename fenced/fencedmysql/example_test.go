package fencedmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
)

// The examples connect to the server of scripts/services.sh (or
// CONCURKIT_MYSQL_DSN) and work in temporary tables of one connection. A
// missing server fails the example, never the test binary.

func exampleMySQL(ctx context.Context) (*sql.DB, *sql.Conn, error) {
	dsn := env("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/")
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS concurkit_examples"); err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("mysql", dsn+"concurkit_examples")
	if err != nil {
		return nil, nil, err
	}
	conn, err := db.Conn(ctx) // temporary tables live on one connection
	if err == nil {
		_, err = conn.ExecContext(ctx, "CREATE TEMPORARY TABLE accounts (id BIGINT PRIMARY KEY, owner VARCHAR(64) NOT NULL DEFAULT '', amount BIGINT NOT NULL DEFAULT 0, max_seen_token BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 1)")
	}
	if err == nil {
		_, err = conn.ExecContext(ctx, "CREATE TEMPORARY TABLE concurkit_fences (resource VARCHAR(255) PRIMARY KEY, max_seen_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB")
	}
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, conn, nil
}

func ExampleWrite() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	accounts := fenced.Table{Name: "accounts"}

	fmt.Println(fencedmysql.Write(ctx, conn, accounts, 1, 7, map[string]any{"owner": "A"}))
	fmt.Println(fencedmysql.Write(ctx, conn, accounts, 1, 8, map[string]any{"owner": "B"}))
	err = fencedmysql.Write(ctx, conn, accounts, 1, 7, map[string]any{"owner": "A again"})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	// Output:
	// <nil>
	// <nil>
	// true
}

// With VersionColumn, the fenced update bumps the version, so an
// optimistic writer holding the old version conflicts.
func ExampleUpdate() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	accounts := fenced.Table{Name: "accounts", VersionColumn: "version"}
	_, _ = conn.ExecContext(ctx, "INSERT INTO accounts (id, amount) VALUES (1, 100)") // version 1

	fmt.Println(fencedmysql.Update(ctx, conn, accounts, 1, 5, map[string]any{"amount": 90}))
	err = fencedmysql.Update(ctx, conn, accounts, 1, 4, map[string]any{"amount": 0})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	res, _ := conn.ExecContext(ctx, "UPDATE accounts SET amount = 50, version = version + 1 WHERE id = 1 AND version = 1")
	n, _ := res.RowsAffected()
	fmt.Println("compare-and-swap with version 1:", n, "rows")
	// Output:
	// <nil>
	// true
	// compare-and-swap with version 1: 0 rows
}

func ExampleAdmit() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	admit := func(token fenced.Token) error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fencedmysql.Admit(ctx, tx, fenced.Fence{}, "webhook:42", token); err != nil {
			return err
		}
		return tx.Commit()
	}
	fmt.Println(admit(3), admit(3), errors.Is(admit(2), fenced.ErrStaleToken))
	// Output: <nil> <nil> true
}

func ExampleNewSequence() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	name := fmt.Sprintf("example_seq_%d", rand.Uint32())
	if err := fencedmysql.CreateSequence(ctx, conn, name); err != nil {
		fmt.Println(err)
		return
	}
	defer conn.ExecContext(ctx, "DROP SEQUENCE "+name)
	src, err := fencedmysql.NewSequence(conn, name)
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := src.Next(ctx)
	b, _ := src.Next(ctx)
	fmt.Println(a, b)
	// Output: 1 2
}

func ExampleCreateSequence() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	name := fmt.Sprintf("example_seq_%d", rand.Uint32())
	defer conn.ExecContext(ctx, "DROP SEQUENCE IF EXISTS "+name)
	// Idempotent: the migrations create the default sequence too.
	fmt.Println(fencedmysql.CreateSequence(ctx, conn, name))
	fmt.Println(fencedmysql.CreateSequence(ctx, conn, name))
	// Output:
	// <nil>
	// <nil>
}
