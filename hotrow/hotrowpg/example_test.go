package hotrowpg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowpg"
)

// examplePool connects to the server of scripts/services.sh (or
// CONCURKIT_POSTGRES_URL) and creates table name with item 1 at stock 3.
func examplePool(ctx context.Context, name string) (*pgxpool.Pool, func(), error) {
	// name is unique per run by the caller (examples may run side by side).
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	q := `CREATE TABLE ` + name + ` (id bigint PRIMARY KEY, v bigint NOT NULL); INSERT INTO ` + name + ` VALUES (1, 3)`
	if _, err := pool.Exec(ctx, q); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, func() { _, _ = pool.Exec(context.Background(), `DROP TABLE `+name); pool.Close() }, nil
}

func ExampleAdd() {
	ctx := context.Background()
	name := fmt.Sprintf("example_hotrow_escrow_%d", rand.Int64())
	pool, done, err := examplePool(ctx, name)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	stock := hotrow.Table{Name: name} // columns id and v

	// One conditional UPDATE per call: no read, no version, no retry.
	v, err := hotrowpg.Add(ctx, pool, stock, 1, -2, hotrow.AtLeast(0))
	fmt.Println(v, err)
	_, err = hotrowpg.Add(ctx, pool, stock, 1, -2, hotrow.AtLeast(0))
	fmt.Println(errors.Is(err, hotrow.ErrInsufficient))
	// Output:
	// 1 <nil>
	// true
}

func ExampleNewStore() {
	ctx := context.Background()
	name := fmt.Sprintf("example_hotrow_combined_%d", rand.Int64())
	pool, done, err := examplePool(ctx, name)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	store, err := hotrowpg.NewStore[int64](pool, hotrow.Table{Name: name})
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

	// Concurrent callers share batches: one UPDATE and one commit each.
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
	pool, done, err := examplePool(ctx, name) // account 1 holds 3
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	if _, err := pool.Exec(ctx, `INSERT INTO `+name+` VALUES (2, 0)`); err != nil {
		fmt.Println(err)
		return
	}
	store, err := hotrowpg.NewLedgerStore[int64](pool, hotrow.Table{Name: name})
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

	// Concurrent transfers share batches: one transaction each, which
	// locks the accounts it touches in key order.
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
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	// The shard table: see migrations.TemplateOptions.ShardTable.
	if _, err := pool.Exec(ctx, `CREATE TABLE `+name+` (id text, shard int, v bigint NOT NULL, PRIMARY KEY (id, shard))`); err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Exec(context.Background(), `DROP TABLE `+name)
	store, err := hotrowpg.NewShardStore[string](pool, hotrow.Table{Name: name}) // columns id, shard, v
	if err != nil {
		fmt.Println(err)
		return
	}
	views, err := hotrow.NewSharded[string](store, nil) // 16 shards
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := views.Create(ctx, "home", 0); err != nil {
		fmt.Println(err)
		return
	}
	for range 100 { // concurrent writers would mostly touch different rows
		if err := views.Add(ctx, "home", 1); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(views.Value(ctx, "home"))
	// Output: 100 <nil>
}
