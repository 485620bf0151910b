package migrations_test

import (
	"context"
	"errors"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"io/fs"
	"net/url"
	"os"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
)

// exampleURL returns the URL of the test PostgreSQL server (see
// scripts/services.sh) with search_path set to a fresh schema, so that the
// example does not touch anything else. The examples print an error and
// return instead of log.Fatal, which would end the package's whole test
// binary when the server is not running.
func exampleURL(schema string) (string, error) {
	base := os.Getenv("CONCURKIT_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+q+" CASCADE; CREATE SCHEMA "+q); err != nil {
		return "", err
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", errors.New("CONCURKIT_POSTGRES_URL is not a URL")
	}
	v := u.Query()
	v.Set("search_path", schema)
	u.RawQuery = v.Encode()
	return u.String(), nil
}

func ExampleUp() {
	ctx := context.Background()
	dsn, err := exampleURL("ck_example_up")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := migrations.Up(ctx, migrations.Postgres, dsn); err != nil {
		fmt.Println(err)
		return
	}
	version, dirty, err := migrations.Version(ctx, migrations.Postgres, dsn)
	fmt.Println(version, dirty, err)
	// Output: 6 false <nil>
}

func ExampleDown() {
	ctx := context.Background()
	dsn, err := exampleURL("ck_example_down")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := migrations.Up(ctx, migrations.Postgres, dsn); err != nil {
		fmt.Println(err)
		return
	}
	if err := migrations.Down(ctx, migrations.Postgres, dsn); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(migrations.Version(ctx, migrations.Postgres, dsn))
	// Output: 0 false <nil>
}

func ExampleVersion() {
	ctx := context.Background()
	dsn, err := exampleURL("ck_example_version")
	if err != nil {
		fmt.Println(err)
		return
	}
	v, dirty, err := migrations.Version(ctx, migrations.Postgres, dsn)
	fmt.Println(v, dirty, err) // nothing applied yet
	// Output: 0 false <nil>
}

func ExampleFS() {
	fsys, err := migrations.FS(migrations.MySQL)
	if err != nil {
		fmt.Println(err)
		return
	}
	names, _ := fs.Glob(fsys, "*.sql")
	fmt.Println(names)
	// Output: [0001_fencing.down.sql 0001_fencing.up.sql 0002_idempotency.down.sql 0002_idempotency.up.sql 0003_messaging.down.sql 0003_messaging.up.sql 0004_saga.down.sql 0004_saga.up.sql]
}

func ExampleExamplesFS() {
	fsys, err := migrations.ExamplesFS(migrations.Postgres)
	if err != nil {
		fmt.Println(err)
		return
	}
	names, _ := fs.Glob(fsys, "*.up.sql")
	fmt.Println(names)
	// Output: [0001_examples.up.sql]
}

func ExampleObjects() {
	objects, err := migrations.Objects(migrations.Postgres)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objects {
		fmt.Println(o.Kind, o.Name)
	}
	fmt.Println("history table", migrations.HistoryTable)
	// Output:
	// table concurkit_fences
	// sequence concurkit_fence_token_seq
	// sequence concurkit_lock_token_seq
	// table concurkit_idempotency_keys
	// table concurkit_inbox
	// table concurkit_inbox_sequences
	// table concurkit_outbox
	// table concurkit_sagas
	// table concurkit_ratelimit_windows
	// table concurkit_ratelimit_gcra
	// table concurkit_elections
	// history table concurkit_schema_migrations
}

func ExampleParseDialect() {
	for _, s := range []string{"mysql", "oracle"} {
		d, err := migrations.ParseDialect(s)
		fmt.Println(d, errors.Is(err, concurkit.ErrInvalidArgument))
	}
	// Output:
	// mysql false
	// oracle true
}

func ExampleUpExamples() {
	ctx := context.Background()
	dsn, err := exampleURL("ck_example_upexamples")
	if err != nil {
		fmt.Println(err)
		return
	}
	// The demo tables, recorded in their own history table: Up (the
	// toolkit set) neither needs nor touches them.
	if err := migrations.UpExamples(ctx, migrations.Postgres, dsn); err != nil {
		fmt.Println(err)
		return
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	var version int64
	if err := conn.QueryRow(ctx, `SELECT version FROM `+migrations.ExamplesHistoryTable).Scan(&version); err != nil {
		fmt.Println(err)
		return
	}
	if err := migrations.DownExamples(ctx, migrations.Postgres, dsn); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("examples version", version)
	// Output: examples version 1
}

func ExampleDownExamples() {
	ctx := context.Background()
	dsn, err := exampleURL("ck_example_downexamples")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, apply := range []func(context.Context, migrations.Dialect, string) error{migrations.UpExamples, migrations.DownExamples} {
		if err := apply(ctx, migrations.Postgres, dsn); err != nil {
			fmt.Println(err)
			return
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	var n int
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'inventory'`).Scan(&n)
	fmt.Println("inventory tables left:", n)
	// Output: inventory tables left: 0
}

func ExampleTimestampVersion() {
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	fmt.Println(migrations.TimestampVersion(at))
	// Output: 20260301093000
}

func ExampleNextSequential() {
	dir := fstest.MapFS{ // a service's migration directory (os.DirFS(dir) in real use)
		"0001_users.up.sql":   {},
		"0001_users.down.sql": {},
		"0002_email.up.sql":   {},
		"0002_email.down.sql": {},
	}
	version, digits, err := migrations.NextSequential(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	files, err := migrations.Template(migrations.TemplateOptions{
		Dialect: migrations.MySQL, Table: "orders", VersionColumn: migrations.DefaultVersionColumn,
		Version: version, Digits: digits,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(files.UpName)
	// Output: 0003_concurkit_orders.up.sql
}

func ExampleTemplate() {
	files, err := migrations.Template(migrations.TemplateOptions{
		Dialect:       migrations.Postgres,
		Table:         "shop.orders",
		VersionColumn: migrations.DefaultVersionColumn,
		FencingColumn: migrations.DefaultFencingColumn,
		FenceTable:    migrations.DefaultFenceTable,
		Sequences:     []string{migrations.DefaultFenceSequence},
		LockTimeout:   3 * time.Second,
		Version:       migrations.TimestampVersion(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(files.UpName)
	fmt.Print(files.Up)
	fmt.Println(files.DownName)
	fmt.Print(files.Down)
	// Output:
	// 20260101120000_concurkit_shop_orders.up.sql
	// -- Generated by concurkit migrate template.
	// -- lock_timeout: an ALTER TABLE waits for every transaction using the table,
	// -- and every later query on it queues behind the ALTER. Fail fast instead
	// -- and rerun when the table is quieter (golang-migrate: the failed version is
	// -- marked dirty and its statements rolled back: migrate force the previous one).
	// SET lock_timeout = '3s';
	// CREATE TABLE "concurkit_fences" (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0);
	// CREATE SEQUENCE "concurkit_fence_token_seq" AS bigint MINVALUE 1;
	// ALTER TABLE "shop"."orders" ADD COLUMN "version" BIGINT NOT NULL DEFAULT 1, ADD COLUMN "max_seen_token" BIGINT NOT NULL DEFAULT 0;
	// RESET lock_timeout;
	// 20260101120000_concurkit_shop_orders.down.sql
	// -- Generated by concurkit migrate template: reverts the matching up migration.
	// -- lock_timeout: an ALTER TABLE waits for every transaction using the table,
	// -- and every later query on it queues behind the ALTER. Fail fast instead
	// -- and rerun when the table is quieter (golang-migrate: the failed version is
	// -- marked dirty and its statements rolled back: migrate force the previous one).
	// SET lock_timeout = '3s';
	// ALTER TABLE "shop"."orders" DROP COLUMN "max_seen_token", DROP COLUMN "version";
	// DROP SEQUENCE "concurkit_fence_token_seq";
	// DROP TABLE "concurkit_fences";
	// RESET lock_timeout;
}

func ExampleUpFS() {
	ctx := context.Background()
	dsn, err := exampleURL("ck_example_upfs")
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (id bigint PRIMARY KEY)`); err != nil {
		fmt.Println(err)
		return
	}
	files, err := migrations.Template(migrations.TemplateOptions{
		Dialect: migrations.Postgres, Table: "orders", VersionColumn: "version", Version: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "migrations")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	_ = os.WriteFile(dir+"/"+files.UpName, []byte(files.Up), 0o644)
	_ = os.WriteFile(dir+"/"+files.DownName, []byte(files.Down), 0o644)
	if err := migrations.UpFS(ctx, migrations.Postgres, os.DirFS(dir), dsn); err != nil {
		fmt.Println(err)
		return
	}
	var version int64
	if err := conn.QueryRow(ctx, `INSERT INTO orders (id) VALUES (1) RETURNING version`).Scan(&version); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("new rows start at version", version)
	// Output: new rows start at version 1
}

func ExampleDownFS() {
	ctx := context.Background()
	dsn, err := exampleURL("ck_example_downfs")
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (id bigint PRIMARY KEY)`); err != nil {
		fmt.Println(err)
		return
	}
	files, err := migrations.Template(migrations.TemplateOptions{
		Dialect: migrations.Postgres, Table: "orders", FencingColumn: migrations.DefaultFencingColumn, Version: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "migrations")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	_ = os.WriteFile(dir+"/"+files.UpName, []byte(files.Up), 0o644)
	_ = os.WriteFile(dir+"/"+files.DownName, []byte(files.Down), 0o644)
	for _, apply := range []func(context.Context, migrations.Dialect, fs.FS, string) error{migrations.UpFS, migrations.DownFS} {
		if err := apply(ctx, migrations.Postgres, os.DirFS(dir), dsn); err != nil {
			fmt.Println(err)
			return
		}
	}
	var columns int
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'orders'`).Scan(&columns)
	fmt.Println("columns after up and down:", columns)
	// Output: columns after up and down: 1
}
