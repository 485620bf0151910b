package idempotencymysql_test

import (
	"context"
	"database/sql"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"os"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/migrations"
)

// exampleDSN creates a fresh database on the test server
// (scripts/services.sh or CONCURKIT_MYSQL_DSN) and returns its DSN and a
// function that drops it. The example prints errors instead of log.Fatal.
func exampleDSN(ctx context.Context, name string) (string, func(), error) {
	base := os.Getenv("CONCURKIT_MYSQL_DSN")
	if base == "" {
		base = "root@tcp(127.0.0.1:13306)/"
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		return "", nil, err
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	drop := func() {
		_, _ = admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS `"+name+"`")
		_ = admin.Close()
	}
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		drop()
		return "", nil, err
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		drop()
		return "", nil, err
	}
	cfg.DBName, cfg.MultiStatements = name, true
	return cfg.FormatDSN(), drop, nil
}

func ExampleNew() {
	ctx := context.Background()
	dsn, drop, err := exampleDSN(ctx, "ck_example_idempotencymysql")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	// The key table comes with concurkit's toolkit migrations.
	if err := migrations.Up(ctx, migrations.MySQL, dsn); err != nil {
		fmt.Println(err)
		return
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	store, err := idempotencymysql.New(db, nil)
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
