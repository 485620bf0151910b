package fencedpg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
)

// The examples connect to the server of scripts/services.sh (or
// CONCURKIT_POSTGRES_URL) and work in temporary tables or a schema they
// drop. A missing server fails the example, never the test binary.

func pgURL() string {
	return env("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable")
}

func examplePostgres(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, pgURL())
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, `CREATE TEMP TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL DEFAULT '',
		amount bigint NOT NULL DEFAULT 0, max_seen_token bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 1);
		CREATE TEMP TABLE concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)`)
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// A holder with token 7 writes; its lock is taken over by a holder with
// token 8, who writes; the old holder wakes up and its write is refused.
func ExampleWrite() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	accounts := fenced.Table{Name: "accounts"} // key column "id", token column "max_seen_token"

	fmt.Println(fencedpg.Write(ctx, conn, accounts, 1, 7, map[string]any{"owner": "A"}))
	fmt.Println(fencedpg.Write(ctx, conn, accounts, 1, 8, map[string]any{"owner": "B"}))
	err = fencedpg.Write(ctx, conn, accounts, 1, 7, map[string]any{"owner": "A again"})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))

	var owner string
	_ = conn.QueryRow(ctx, "SELECT owner FROM accounts WHERE id = 1").Scan(&owner)
	fmt.Println(owner)
	// Output:
	// <nil>
	// <nil>
	// true
	// B
}

func ExampleUpdate() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	accounts := fenced.Table{Name: "accounts"}

	err = fencedpg.Update(ctx, conn, accounts, 42, 1, map[string]any{"amount": 10})
	fmt.Println(errors.Is(err, fenced.ErrNotFound))
	_, _ = conn.Exec(ctx, "INSERT INTO accounts (id) VALUES (42)")
	fmt.Println(fencedpg.Update(ctx, conn, accounts, 42, 3, map[string]any{"amount": 10}))
	err = fencedpg.Update(ctx, conn, accounts, 42, 2, map[string]any{"amount": 99})
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	// Output:
	// true
	// <nil>
	// true
}

// Hold a lease, write fenced and versioned: a background job that holds a
// distributed lock credits interest to an account that optimistic
// transfers also update. The job reads the balance with FOR UPDATE and
// writes it with fencedpg.Update in one transaction; the Table's
// VersionColumn makes that write bump the version, so a transfer that
// read the account before the job wrote fails its compare-and-swap (and
// retries on the new balance) instead of overwriting the interest.
//
// The lock here is the PostgreSQL advisory-lock backend; any
// distlock.Locker works the same way. distlock.Do acquires, runs the job
// with a context that ends with the lease, and releases.
func ExampleUpdate_withLease() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	schema := fmt.Sprintf("example_%d", rand.Uint32())
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+schema+`;
		CREATE TABLE `+schema+`.accounts (id bigint PRIMARY KEY, balance bigint NOT NULL,
			version bigint NOT NULL DEFAULT 1, max_seen_token bigint NOT NULL DEFAULT 0);
		INSERT INTO `+schema+`.accounts (id, balance) VALUES (1, 1000)`); err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	accounts := fenced.Table{Schema: schema, Name: "accounts", VersionColumn: "version"}

	// A transfer reads the account: balance 1000, version 1.
	var balance, version int64
	if err := pool.QueryRow(ctx, "SELECT balance, version FROM "+schema+".accounts WHERE id = 1").Scan(&balance, &version); err != nil {
		fmt.Println(err)
		return
	}

	// The job holds the lock and credits 1% interest, fenced by its token
	// and versioned, reading the balance with FOR UPDATE in the same
	// transaction.
	locker, err := pglock.New(pool, &pglock.Config{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = distlock.Do(ctx, locker, "interest:account-1", nil, func(ctx context.Context, lease distlock.Lease) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var b int64
			if err := tx.QueryRow(ctx, "SELECT balance FROM "+schema+".accounts WHERE id = 1 FOR UPDATE").Scan(&b); err != nil {
				return err
			}
			return fencedpg.Update(ctx, tx, accounts, 1, lease.Token(), map[string]any{"balance": b + b/100})
		})
	})
	fmt.Println("job:", err)

	// The transfer's compare-and-swap with the version it read now fails.
	_, err = optimisticpg.Update(ctx, pool, optimistic.Table{Schema: schema, Name: "accounts"}, 1, version,
		map[string]any{"balance": balance - 100})
	fmt.Println("stale transfer:", err)

	_ = pool.QueryRow(ctx, "SELECT balance, version FROM "+schema+".accounts WHERE id = 1").Scan(&balance, &version)
	fmt.Println("balance", balance, "version", version)
	// Output:
	// job: <nil>
	// stale transfer: optimistic: version conflict
	// balance 1010 version 2
}

// Admit guards a side effect outside the database: the e-mail is sent only
// by a holder whose token the fence row admitted in a committed
// transaction.
func ExampleAdmit() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	sendReceipt := func(token fenced.Token) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// The zero Fence is the table concurkit_fences.
			if err := fencedpg.Admit(ctx, tx, fenced.Fence{}, "receipt:order-17", token); err != nil {
				return err
			}
			fmt.Println("sending receipt with token", token)
			return nil
		})
	}
	fmt.Println(sendReceipt(12))
	fmt.Println(errors.Is(sendReceipt(11), fenced.ErrStaleToken))
	// Output:
	// sending receipt with token 12
	// <nil>
	// true
}

func ExampleNewSequence() {
	ctx := context.Background()
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	seq := fmt.Sprintf("example_seq_%d", rand.Uint32())
	if err := fencedpg.CreateSequence(ctx, conn, "pg_temp", seq); err != nil {
		fmt.Println(err)
		return
	}
	src, err := fencedpg.NewSequence(conn, "pg_temp", seq)
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
	conn, err := examplePostgres(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	// Idempotent: the migrations create the default sequence too.
	fmt.Println(fencedpg.CreateSequence(ctx, conn, "pg_temp", "tokens"))
	fmt.Println(fencedpg.CreateSequence(ctx, conn, "pg_temp", "tokens"))
	// Output:
	// <nil>
	// <nil>
}
