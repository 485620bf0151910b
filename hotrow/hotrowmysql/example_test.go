package hotrowmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowmysql"
)

// exampleDB connects to the server of scripts/services.sh (or
// CONCURKIT_MYSQL_DSN) and creates database name with table stock, item 1
// at 3.
func exampleDB(ctx context.Context, name string) (*sql.DB, func(), error) {
	dsn := os.Getenv("CONCURKIT_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:13306)/"
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, nil, err
	}
	for _, q := range []string{
		"CREATE DATABASE " + name,
		"CREATE TABLE " + name + ".stock (id BIGINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB",
		"INSERT INTO " + name + ".stock VALUES (1, 3)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
			db.Close()
			return nil, nil, err
		}
	}
	return db, func() { _, _ = db.ExecContext(context.Background(), "DROP DATABASE "+name); db.Close() }, nil
}

func ExampleAdd() {
	ctx := context.Background()
	name := fmt.Sprintf("example_hotrow_escrow_%d", rand.Int64())
	db, done, err := exampleDB(ctx, name)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	stock := hotrow.Table{Schema: name, Name: "stock"}

	v, err := hotrowmysql.Add(ctx, db, stock, 1, -2, hotrow.AtLeast(0))
	fmt.Println(v, err)
	_, err = hotrowmysql.Add(ctx, db, stock, 1, -2, hotrow.AtLeast(0))
	fmt.Println(errors.Is(err, hotrow.ErrInsufficient))
	// Output:
	// 1 <nil>
	// true
}

func ExampleNewStore() {
	ctx := context.Background()
	name := fmt.Sprintf("example_hotrow_combined_%d", rand.Int64())
	db, done, err := exampleDB(ctx, name)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	store, err := hotrowmysql.NewStore[int64](db, hotrow.Table{Schema: name, Name: "stock"})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := hotrow.NewCombiner[int64](store, &hotrow.Options{Floor: hotrow.AtLeast(0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	v, err := c.Add(ctx, 1, +7)
	fmt.Println(v, err)
	_, err = c.Add(ctx, 1, -11)
	fmt.Println(errors.Is(err, hotrow.ErrInsufficient))
	// Output:
	// 10 <nil>
	// true
}

func ExampleNewLedgerStore() {
	ctx := context.Background()
	name := fmt.Sprintf("example_hotrow_ledger_%d", rand.Int64())
	db, done, err := exampleDB(ctx, name) // account 1 holds 3
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	if _, err := db.ExecContext(ctx, "INSERT INTO "+name+".stock VALUES (2, 0)"); err != nil {
		fmt.Println(err)
		return
	}
	store, err := hotrowmysql.NewLedgerStore[int64](db, hotrow.Table{Schema: name, Name: "stock"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ledger, err := hotrow.NewLedger[int64](store, nil) // nil: no overdraft
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ledger.Close(ctx)

	b, err := ledger.Transfer(ctx, hotrow.Transfer[int64]{From: 1, To: 2, Amount: 2})
	fmt.Printf("%+v %v\n", b, err)
	_, err = ledger.Transfer(ctx, hotrow.Transfer[int64]{From: 1, To: 2, Amount: 2})
	fmt.Println(errors.Is(err, hotrow.ErrInsufficient))
	// Output:
	// {From:1 To:2} <nil>
	// true
}

func ExampleNewShardStore() {
	ctx := context.Background()
	name := fmt.Sprintf("example_hotrow_shards_%d", rand.Int64())
	db, done, err := exampleDB(ctx, name)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	// The shard table: see migrations.TemplateOptions.ShardTable.
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+name+`.shards (id VARCHAR(255), shard INT, v BIGINT NOT NULL, PRIMARY KEY (id, shard)) ENGINE=InnoDB`); err != nil {
		fmt.Println(err)
		return
	}
	store, err := hotrowmysql.NewShardStore[string](db, hotrow.Table{Schema: name, Name: "shards"})
	if err != nil {
		fmt.Println(err)
		return
	}
	seats, err := hotrow.NewSharded[string](store, &hotrow.ShardedOptions{Shards: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := seats.Create(ctx, "flight-42", 3); err != nil {
		fmt.Println(err)
		return
	}
	for range 4 {
		fmt.Println(seats.Take(ctx, "flight-42", 1)) // borrows from other shards as they run dry
	}
	fmt.Println(seats.Value(ctx, "flight-42"))
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// hotrow: insufficient
	// 0 <nil>
}
