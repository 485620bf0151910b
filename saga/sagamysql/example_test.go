package sagamysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/sagamysql"
)

// The examples use a temporary copy of the toolkit's concurkit_sagas
// table on one connection to the MariaDB of scripts/services.sh (or
// CONCURKIT_MYSQL_DSN), in the database concurkit_examples. A service
// applies the toolkit migrations (migrations.Up) and gives New its *sql.DB
// instead.
func exampleConn(ctx context.Context) (*sql.DB, *sql.Conn, error) {
	dsn := os.Getenv("CONCURKIT_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:13306)/"
	}
	fsys, err := migrations.FS(migrations.MySQL)
	if err != nil {
		return nil, nil, err
	}
	ddl, err := fs.ReadFile(fsys, "0004_saga.up.sql")
	if err != nil {
		return nil, nil, err
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS concurkit_examples"); err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("mysql", dsn+"concurkit_examples")
	if err != nil {
		return nil, nil, err
	}
	conn, err := db.Conn(ctx) // a temporary table lives on one connection
	if err == nil {
		_, err = conn.ExecContext(ctx, strings.Replace(string(ddl), "CREATE TABLE IF NOT EXISTS", "CREATE TEMPORARY TABLE", 1))
	}
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, conn, nil
}

func ExampleNew() {
	ctx := context.Background()
	db, conn, err := exampleConn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	store, err := sagamysql.New(conn, nil) // table concurkit_sagas
	if err != nil {
		fmt.Println(err)
		return
	}
	signup, err := saga.New("signup", 1, nil,
		saga.NewStep("account", func(ctx context.Context, c *saga.Call[string]) (int, error) { return 1001, nil }, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := signup.Run(ctx, store, "signup-ann", "ann@example.com"); err != nil {
		fmt.Println(err)
		return
	}
	rec, err := store.Load(ctx, "signup-ann")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rec.Definition, rec.Version, rec.Status, rec.Steps[0].Name, rec.Steps[0].Status, string(rec.Steps[0].Result))
	// Output: signup 1 completed account done 1001
}

// A recovery job: a saga interrupted mid-step (here by its context; in
// production by a crash, once its lease has expired) is listed by
// Unfinished and run again from its stored input.
func ExampleStore_Unfinished() {
	ctx := context.Background()
	db, conn, err := exampleConn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	store, err := sagamysql.New(conn, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	stop, cancel := context.WithCancel(ctx)
	d, err := saga.New("export", 1, nil,
		saga.NewStep("copy", func(ctx context.Context, c *saga.Call[string]) (string, error) {
			if c.Attempt == 1 {
				cancel() // the process goes away in the middle of the step
				return "", ctx.Err()
			}
			fmt.Println("copy", c.Input, "attempt", c.Attempt)
			return "done", nil
		}, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = d.Run(stop, store, "export-9", "s3://bucket/report.csv")
	fmt.Println(err != nil)

	recs, err := store.Unfinished(ctx, time.Now(), 100)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, rec := range recs {
		var input string
		if err := json.Unmarshal(rec.Input, &input); err != nil {
			fmt.Println(err)
			continue
		}
		_, err := d.Run(ctx, store, rec.Key, input)
		fmt.Println(rec.Key, err)
	}
	// Output:
	// true
	// copy s3://bucket/report.csv attempt 2
	// export-9 <nil>
}

// A reaper deletes finished instances in batches once clients no longer
// retry them.
func ExampleStore_DeleteFinished() {
	ctx := context.Background()
	db, conn, err := exampleConn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()
	store, err := sagamysql.New(conn, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := saga.New("ping", 1, nil, saga.NewStep("ping", func(context.Context, *saga.Call[int]) (int, error) { return 1, nil }, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 5 {
		if _, err := d.Run(ctx, store, fmt.Sprint("ping-", i), i); err != nil {
			fmt.Println(err)
			return
		}
	}
	cutoff := time.Now().Add(time.Minute) // production: time.Now().Add(-7 * 24 * time.Hour)
	for {
		n, err := store.DeleteFinished(ctx, cutoff, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("deleted", n)
		if n < 2 {
			break
		}
	}
	// Output:
	// deleted 2
	// deleted 2
	// deleted 1
}
