package concurkit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/migrations"
	_ "github.com/concurkit/concurkit/migrations/migrationspg" // migrations.Up's driver
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertpg"
)

// The README's snippets are excerpts of these Examples (readme_test.go
// checks that every Go block of the README appears in a test file), so the
// README's code compiles and runs against the test servers.

// examplePool returns a pool whose connections use a fresh schema with an
// accounts table (ids 1 and 2, balance 100, version 1, fenced by
// max_seen_token) and an inventory table (id 7, stock 1); done drops the
// schema.
func examplePool(ctx context.Context) (pool *pgxpool.Pool, done func(), err error) {
	pool, _, done, err = exampleSchema(ctx)
	return pool, done, err
}

// exampleSchema is examplePool, and also returns a URL of the schema (its
// search_path set), for migrations.Up.
func exampleSchema(ctx context.Context) (pool *pgxpool.Pool, schemaURL string, done func(), err error) {
	base := os.Getenv("CONCURKIT_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, "", nil, err
	}
	schema := fmt.Sprintf("readme_%d", rand.Uint32())
	q := u.Query()
	q.Set("options", "-csearch_path="+schema)
	u.RawQuery = q.Encode()
	if pool, err = pgxpool.New(ctx, u.String()); err != nil {
		return nil, "", nil, err
	}
	_, err = pool.Exec(ctx, `CREATE SCHEMA `+schema+`;
		CREATE TABLE `+schema+`.accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, version bigint NOT NULL DEFAULT 1,
			max_seen_token bigint NOT NULL DEFAULT 0);
		INSERT INTO `+schema+`.accounts (id, balance) VALUES (1, 100), (2, 100);
		CREATE TABLE `+schema+`.inventory (id bigint PRIMARY KEY, stock bigint NOT NULL);
		INSERT INTO `+schema+`.inventory VALUES (7, 1);
		CREATE TABLE `+schema+`.payments (id text PRIMARY KEY, amount bigint NOT NULL)`)
	if err != nil {
		pool.Close()
		return nil, "", nil, err
	}
	return pool, u.String(), func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}, nil
}

// One row, read-modify-write: optimistic.Do runs the closure again when the
// compare-and-swap finds another version.
func Example_optimistic() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	id := int64(1)

	accounts := optimistic.Table{Name: "accounts"} // KeyColumn "id", VersionColumn "version"
	err = optimistic.Do(ctx, retry.Policy{}, func(ctx context.Context) error {
		var balance, version int64
		if err := pool.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = $1", id).Scan(&balance, &version); err != nil {
			return err
		}
		_, err := optimisticpg.Update(ctx, pool, accounts, id, version, map[string]any{"balance": balance + 10})
		return err // optimistic.ErrConflict makes Do run the closure again
	})
	fmt.Println(err)
	// Output: <nil>
}

// Several rows: the compare-and-swaps run in one transaction, which
// pessimisticpg.InTx retries as a unit on a conflict.
func Example_optimisticTransfer() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	accounts := optimistic.Table{Name: "accounts"}

	err = pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
		var from, to [2]int64 // balance, version
		if err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = 1").Scan(&from[0], &from[1]); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = 2").Scan(&to[0], &to[1]); err != nil {
			return err
		}
		// In key order: the UPDATEs take row locks.
		if _, err := optimisticpg.Update(ctx, tx, accounts, 1, from[1], map[string]any{"balance": from[0] - 30}); err != nil {
			return err
		}
		_, err := optimisticpg.Update(ctx, tx, accounts, 2, to[1], map[string]any{"balance": to[0] + 30})
		return err
	})
	fmt.Println(err)
	// Output: <nil>
}

// Lock first, then write: a bounded wait, retried on deadlocks.
func Example_pessimistic() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	sku := int64(7)

	opts := &pessimistic.Options{LockTimeout: 2 * time.Second}
	err = pessimisticpg.InTx(ctx, pool, opts, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := pessimisticpg.LockRows(ctx, tx, "inventory", "id", []int64{sku}, pessimistic.Lock{}); err != nil {
			return err // pessimistic.ErrLockTimeout after 2 s
		}
		_, err := tx.Exec(ctx, "UPDATE inventory SET stock = stock - 1 WHERE id = $1 AND stock > 0", sku)
		return err
	})
	fmt.Println(err)
	// Output: <nil>
}

// Create once, and know whether this call created it.
func Example_upsert() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()

	payments := upsert.Table{Name: "payments"} // KeyColumn "id"
	for range 2 {
		created, err := upsertpg.Insert(ctx, pool, payments, map[string]any{"id": "order-42", "amount": 500})
		fmt.Println(created, err)
	}
	// Output:
	// true <nil>
	// false <nil>
}

// A fenced job that computes the new value from the row: the read is in
// the write's transaction, with FOR UPDATE. Read on the pool instead and a
// transfer committed between the read and the write is overwritten: money
// created or destroyed (TestFencedReadModifyWrite shows it).
func Example_fencedJob() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	id := int64(1)

	accounts := fenced.Table{Name: "accounts", VersionColumn: "version"}
	err = distlock.Do(ctx, locker, "interest-run", &distlock.Options{TTL: 10 * time.Second, AutoExtend: true},
		func(ctx context.Context, lease distlock.Lease) error {
			return pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
				var balance int64 // read in the write's transaction, the row locked until COMMIT
				if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE", id).Scan(&balance); err != nil {
					return err
				}
				return fencedpg.Update(ctx, tx, accounts, id, lease.Token(), map[string]any{"balance": balance + balance/100})
			})
		})
	fmt.Println(err)
	var balance, version int64
	_ = pool.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = 1").Scan(&balance, &version)
	fmt.Println("balance", balance, "version", version)
	// Output:
	// <nil>
	// balance 101 version 2
}

// Redis and Redlock cannot mint fencing tokens: a fenced.Source does,
// before each acquisition. migrations.Up creates its default sequence.
func Example_redisTokens() {
	ctx := context.Background()
	pool, schemaURL, done, err := exampleSchema(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	if err := migrations.Up(ctx, migrations.Postgres, schemaURL); err != nil {
		fmt.Println(err)
		return
	}
	addr := os.Getenv("CONCURKIT_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:16379"
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()

	tokens, _ := fencedpg.NewSequence(pool) // concurkit_fence_token_seq, created by migrations.Up; no I/O
	locker, err := redislock.New(rdb, &redislock.Config{Source: tokens})
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := locker.Acquire(ctx, fmt.Sprintf("readme:%d", rand.Uint32()), &distlock.Options{TTL: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("token", lease.Token())
	fmt.Println(lease.Release(ctx))
	// Output:
	// token 1
	// <nil>
}
