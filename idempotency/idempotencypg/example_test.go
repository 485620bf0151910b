package idempotencypg_test

import (
	"context"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"net/url"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
	"github.com/concurkit/concurkit/migrations"
)

// exampleURL returns the URL of the test server (scripts/services.sh or
// CONCURKIT_POSTGRES_URL) with search_path set to a fresh schema, and a
// function that drops it. The example prints errors instead of log.Fatal.
func exampleURL(ctx context.Context, schema string) (string, func(), error) {
	base := os.Getenv("CONCURKIT_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, err
	}
	q := pgx.Identifier{schema}.Sanitize()
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+q+" CASCADE")
		_ = admin.Close(context.WithoutCancel(ctx))
	}
	if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+q+" CASCADE; CREATE SCHEMA "+q); err != nil {
		drop()
		return "", nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	v := u.Query()
	v.Set("options", "-csearch_path="+schema)
	u.RawQuery = v.Encode()
	return u.String(), drop, nil
}

func ExampleNew() {
	ctx := context.Background()
	dsn, drop, err := exampleURL(ctx, "ck_example_idempotencypg")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	// The key table comes with concurkit's toolkit migrations.
	if err := migrations.Up(ctx, migrations.Postgres, dsn); err != nil {
		fmt.Println(err)
		return
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	store, err := idempotencypg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	send := func(context.Context) (string, error) { return "mail sent", nil }
	for range 2 {
		v, replayed, err := idempotency.Do(ctx, store, "tenant-1", "welcome-mail:user-9", nil, nil, send)
		fmt.Println(v, replayed, err)
	}
	// Output:
	// mail sent false <nil>
	// mail sent true <nil>
}
