package optimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
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

	inventory := optimistic.Table{Name: "inventory", KeyColumn: "id", VersionColumn: "version"}
	errSoldOut := errors.New("sold out")
	buy := func(ctx context.Context) error {
		var stock, version int64
		if err := conn.QueryRow(ctx, "SELECT stock, version FROM inventory WHERE id = $1", 1).Scan(&stock, &version); err != nil {
			return err
		}
		if stock == 0 {
			return errSoldOut // not retryable: Do returns it at once
		}
		_, err := optimisticpg.Update(ctx, conn, inventory, 1, version, map[string]any{"stock": stock - 1})
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

	counters := optimistic.Table{Name: "counters", KeyColumn: "id", VersionColumn: "version"}
	increment := func(ctx context.Context) (int64, error) {
		var value, version int64
		if err := conn.QueryRowContext(ctx, "SELECT value, version FROM counters WHERE id = ?", 1).Scan(&value, &version); err != nil {
			return 0, err
		}
		return optimisticmysql.Update(ctx, conn, counters, 1, version, map[string]any{"value": value + 1})
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

// Example_transfer moves money between two rows. Each row is a
// compare-and-swap, and both run inside one transaction with
// pessimisticpg.InTx: a conflict on either row (another transfer got there
// first) rolls the whole transfer back and InTx runs it again, so money is
// never created or destroyed. Two optimistic.Do loops, one per row, could
// not undo the first row's write when the second one conflicts.
func Example_transfer() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, exampleEnv("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TEMPORARY TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, version bigint NOT NULL DEFAULT 1);
INSERT INTO accounts (id, balance) VALUES (1, 100), (2, 0)`)
	if err != nil {
		fmt.Println(err)
		return
	}

	accounts := optimistic.Table{Name: "accounts"} // key "id", version "version"
	errInsufficient := errors.New("insufficient funds")
	transfer := func(ctx context.Context, from, to, amount int64) error {
		// The rows in key order: concurrent transfers in opposite
		// directions then queue on the first row instead of deadlocking.
		legs := []struct{ id, delta int64 }{{from, -amount}, {to, amount}}
		if to < from {
			legs[0], legs[1] = legs[1], legs[0]
		}
		return pessimisticpg.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
			for _, leg := range legs {
				var balance, version int64
				err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = $1", leg.id).Scan(&balance, &version)
				if err != nil {
					return err
				}
				if balance+leg.delta < 0 {
					return errInsufficient // not retryable: InTx rolls back and returns it
				}
				// optimistic.ErrConflict is retryable: InTx rolls back and
				// runs the whole transfer again.
				_, err = optimisticpg.Update(ctx, tx, accounts, leg.id, version, map[string]any{"balance": balance + leg.delta})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	fmt.Println(transfer(ctx, 1, 2, 30))
	fmt.Println(transfer(ctx, 1, 2, 80))
	var a, b int64
	conn.QueryRow(ctx, "SELECT (SELECT balance FROM accounts WHERE id = 1), (SELECT balance FROM accounts WHERE id = 2)").Scan(&a, &b)
	fmt.Println(a, b)
	// Output:
	// <nil>
	// insufficient funds
	// 70 30
}
