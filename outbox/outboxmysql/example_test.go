package outboxmysql_test

import (
	"context"
	"database/sql"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"math/rand/v2"
	"os"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
)

// The examples connect to the server of scripts/services.sh (or
// CONCURKIT_MYSQL_DSN), apply the toolkit migrations in a database of
// their own and drop it afterwards. A missing server fails the example,
// never the test binary.

func exampleDB(ctx context.Context) (*sql.DB, func(), error) {
	dsn := os.Getenv("CONCURKIT_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:13306)/"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	name := fmt.Sprintf("outbox_example_%d", rand.Uint32())
	drop := func() {
		_, _ = admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name)
		_ = admin.Close()
	}
	cfg.DBName = name
	var db *sql.DB
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
	if err == nil {
		err = migrations.Up(ctx, migrations.MySQL, cfg.FormatDSN()) // creates concurkit_outbox, …
	}
	if err == nil {
		db, err = sql.Open("mysql", cfg.FormatDSN())
	}
	if err == nil {
		_, err = db.ExecContext(ctx, "CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)")
	}
	if err != nil {
		if db != nil {
			_ = db.Close()
		}
		drop()
		return nil, nil, err
	}
	return db, func() { _ = db.Close(); drop() }, nil
}

// The order and its event commit together, or neither does; a relay
// publishes what committed.
func ExampleAdd() {
	ctx := context.Background()
	db, cleanup, err := exampleDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	placeOrder := func(id string, fail bool) error {
		return pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", id); err != nil {
				return err
			}
			if _, err := outboxmysql.Add(ctx, tx, outbox.Message{Topic: "orders", Key: id, Headers: map[string]string{"content-type": "text/plain"}}); err != nil {
				return err
			}
			if fail {
				return fmt.Errorf("order %s: payment declined", id)
			}
			return nil
		})
	}
	fmt.Println(placeOrder("o-1", false))
	fmt.Println(placeOrder("o-2", true)) // rolled back: no order, no event
	fmt.Println(placeOrder("o-3", false))

	store, err := outboxmysql.New(db, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	relay, err := outbox.NewRelay(store, outbox.Each(func(_ context.Context, m outbox.Message) error {
		fmt.Println("publish", m.Topic, m.Key, m.Headers["content-type"])
		return nil
	}), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(relay.Once(ctx))
	// Output:
	// <nil>
	// order o-2: payment declined
	// <nil>
	// publish orders o-1 text/plain
	// publish orders o-3 text/plain
	// 2 <nil>
}
