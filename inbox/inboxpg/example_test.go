package inboxpg_test

import (
	"context"
	"errors"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"math/rand/v2"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
)

// The examples connect to the server of scripts/services.sh (or
// CONCURKIT_POSTGRES_URL), apply the toolkit migrations in a schema of
// their own and drop it afterwards. A missing server fails the example,
// never the test binary.

func examplePool(ctx context.Context) (*pgxpool.Pool, func(), error) {
	base := os.Getenv("CONCURKIT_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, nil, err
	}
	schema := fmt.Sprintf("inbox_example_%d", rand.Uint32())
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = admin.Close(context.WithoutCancel(ctx))
	}
	u, err := url.Parse(base)
	if err == nil {
		q := u.Query()
		q.Set("options", "-csearch_path="+schema)
		u.RawQuery = q.Encode()
		_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	}
	if err == nil {
		err = migrations.Up(ctx, migrations.Postgres, u.String()) // creates concurkit_inbox, …
	}
	var pool *pgxpool.Pool
	if err == nil {
		pool, err = pgxpool.New(ctx, u.String())
	}
	if err == nil {
		_, err = pool.Exec(ctx, "CREATE TABLE totals (charged bigint NOT NULL); INSERT INTO totals VALUES (0)")
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		drop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); drop() }, nil
}

// A queue delivers order-1 twice: its effect is applied once.
func ExampleHandle() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	for _, id := range []string{"order-1", "order-2", "order-1"} {
		processed, err := inboxpg.Handle(ctx, pool, "billing", id, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE totals SET charged = charged + 10")
			return err
		})
		fmt.Println(id, processed, err)
	}
	var charged int64
	_ = pool.QueryRow(ctx, "SELECT charged FROM totals").Scan(&charged)
	fmt.Println("charged:", charged)
	// Output:
	// order-1 true <nil>
	// order-2 true <nil>
	// order-1 false <nil>
	// charged: 20
}

// A producer numbers its messages; the transport duplicates 2 and
// delivers 4 before 3. With the default policy, 4 is refused (the
// consumer nacks it) and applied when it comes again after 3.
func ExampleInbox_HandleSequence() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	ib, err := inboxpg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, seq := range []int64{1, 2, 2, 4, 3, 4} {
		res, err := ib.HandleSequence(ctx, "billing", "orders-7f3a", seq, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE totals SET charged = charged + $1", seq)
			return err
		})
		switch {
		case errors.Is(err, inbox.ErrSequenceGap):
			fmt.Println(seq, "refused:", err)
		case err != nil:
			fmt.Println(seq, err)
		case res.Duplicate():
			fmt.Println(seq, "duplicate")
		default:
			fmt.Println(seq, "applied")
		}
	}
	// Output:
	// 1 applied
	// 2 applied
	// 2 duplicate
	// 4 refused: inbox: sequence gap: consumer "billing", producer "orders-7f3a": missing 3
	// 3 applied
	// 4 applied
}

// A five-minute dedup window, like SQS FIFO's, with an injected clock: an
// id is a duplicate for five minutes, then new again; Reap deletes expired
// entries.
func ExampleNew() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ib, err := inboxpg.New(pool, &inbox.Config{Window: 5 * time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	handle := func(id string) {
		processed, err := ib.Handle(ctx, "billing", id, func(context.Context, pgx.Tx) error { return nil })
		fmt.Println(now.Format("15:04"), id, processed, err)
	}
	handle("m1")
	now = now.Add(4 * time.Minute)
	handle("m1")
	now = now.Add(time.Minute)
	handle("m2")
	n, err := ib.Reap(ctx)
	fmt.Println("reaped", n, err)
	handle("m1")
	// Output:
	// 12:00 m1 true <nil>
	// 12:04 m1 false <nil>
	// 12:05 m2 true <nil>
	// reaped 1 <nil>
	// 12:05 m1 true <nil>
}
