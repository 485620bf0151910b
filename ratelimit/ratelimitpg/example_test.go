package ratelimitpg_test

import (
	"context"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitpg"
)

// The examples use the PostgreSQL server of scripts/services.sh (or
// CONCURKIT_POSTGRES_URL) and temporary copies of the tables that
// migrations.Up creates. A missing server fails the example, never the
// test binary.

func exampleConn(ctx context.Context) (*pgx.Conn, error) {
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	// In a service: migrations.Up(ctx, migrations.Postgres, url) once.
	_, err = conn.Exec(ctx, `
		CREATE TEMP TABLE concurkit_ratelimit_windows ("key" text PRIMARY KEY, "window_end" timestamptz NOT NULL, "used" bigint NOT NULL);
		CREATE TEMP TABLE concurkit_ratelimit_gcra ("key" text PRIMARY KEY, "tat" timestamptz NOT NULL)`)
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// Five password attempts per account per hour, with a burst of two: after
// two quick failures the third attempt waits twelve minutes, the time one
// attempt takes to come back at that rate.
func Example() {
	ctx := context.Background()
	conn, err := exampleConn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	limiter, err := ratelimitpg.New(conn, nil) // GCRA; usually a *pgxpool.Pool
	if err != nil {
		fmt.Println(err)
		return
	}
	limit := ratelimit.Limit{Rate: 5, Period: time.Hour, Burst: 2}
	for range 3 {
		d, err := limiter.Allow(ctx, "login:alice", limit)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter.Round(time.Minute))
	}
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 12m0s
}

// Reap deletes the rows of windows that ended (here: on an injected
// clock, past the default grace of a minute).
func ExampleLimiter_Reap() {
	ctx := context.Background()
	conn, err := exampleConn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	limiter, err := ratelimitpg.New(conn, &ratelimitpg.Config{
		Algorithm: ratelimit.FixedWindow,
		Now:       func() time.Time { return now },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, key := range []string{"a", "b", "c"} {
		if _, err := limiter.Allow(ctx, key, ratelimit.Limit{Rate: 10, Period: time.Second}); err != nil {
			fmt.Println(err)
			return
		}
	}
	now = now.Add(time.Minute + 2*time.Second)
	n, err := limiter.Reap(ctx, nil)
	fmt.Println(n, err)
	// Output: 3 <nil>
}

// Reset gives a key its full quota back, for example after an operator
// lifted a block.
func ExampleLimiter_Reset() {
	ctx := context.Background()
	conn, err := exampleConn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	limiter, err := ratelimitpg.New(conn, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	limit := ratelimit.Limit{Rate: 1, Period: time.Hour}
	for range 2 {
		d, _ := limiter.Allow(ctx, "export:tenant-7", limit)
		fmt.Println(d.Allowed)
	}
	fmt.Println(limiter.Reset(ctx, "export:tenant-7"))
	d, _ := limiter.Allow(ctx, "export:tenant-7", limit)
	fmt.Println(d.Allowed)
	// Output:
	// true
	// false
	// <nil>
	// true
}
