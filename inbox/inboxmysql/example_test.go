package inboxmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"math/rand/v2"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxmysql"
	"github.com/concurkit/concurkit/migrations"
)

// The examples connect to the server of scripts/services.sh (or
// CONCURKIT_MYSQL_DSN), apply the toolkit migrations in a database of
// their own and drop it afterwards. A missing server fails the example,
// never the test binary.

func exampleDB(ctx context.Context) (*sql.DB, func(), error) {
	dsn := os.Getenv("CONCURKIT_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:13306)/"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	name := fmt.Sprintf("inbox_example_%d", rand.Uint32())
	drop := func() {
		_, _ = admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name)
		_ = admin.Close()
	}
	cfg.DBName = name
	var db *sql.DB
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
	if err == nil {
		err = migrations.Up(ctx, migrations.MySQL, cfg.FormatDSN()) // creates concurkit_inbox, …
	}
	if err == nil {
		db, err = sql.Open("mysql", cfg.FormatDSN())
	}
	if err == nil {
		_, err = db.ExecContext(ctx, "CREATE TABLE totals (id INT PRIMARY KEY, charged BIGINT NOT NULL)")
	}
	if err == nil {
		_, err = db.ExecContext(ctx, "INSERT INTO totals VALUES (1, 0)")
	}
	if err != nil {
		if db != nil {
			_ = db.Close()
		}
		drop()
		return nil, nil, err
	}
	return db, func() { _ = db.Close(); drop() }, nil
}

// A queue delivers order-1 twice: its effect is applied once.
func ExampleHandle() {
	ctx := context.Background()
	db, cleanup, err := exampleDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	for _, id := range []string{"order-1", "order-2", "order-1"} {
		processed, err := inboxmysql.Handle(ctx, db, "billing", id, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE totals SET charged = charged + 10 WHERE id = 1")
			return err
		})
		fmt.Println(id, processed, err)
	}
	var charged int64
	_ = db.QueryRowContext(ctx, "SELECT charged FROM totals WHERE id = 1").Scan(&charged)
	fmt.Println("charged:", charged)
	// Output:
	// order-1 true <nil>
	// order-2 true <nil>
	// order-1 false <nil>
	// charged: 20
}

// Handle inside a transaction the caller opened: the handler fails, the
// caller commits its own work anyway, and the id is not recorded (Handle
// ran in a savepoint), so the redelivery runs the handler.
func ExampleHandle_callerTransaction() {
	ctx := context.Background()
	db, cleanup, err := exampleDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	charge := func(fail bool) func(ctx context.Context, tx *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE totals SET charged = charged + 10 WHERE id = 1"); err != nil {
				return err
			}
			if fail {
				return errors.New("card declined")
			}
			return nil
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	processed, err := inboxmysql.Handle(ctx, tx, "billing", "order-1", charge(true))
	fmt.Println("in the caller's tx:", processed, err)
	_, _ = tx.ExecContext(ctx, "INSERT INTO totals VALUES (2, 0)") // the caller's own work
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	processed, err = inboxmysql.Handle(ctx, db, "billing", "order-1", charge(false))
	fmt.Println("redelivery:", processed, err)
	var charged, rows int64
	_ = db.QueryRowContext(ctx, "SELECT charged FROM totals WHERE id = 1").Scan(&charged)
	_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM totals").Scan(&rows)
	fmt.Println("charged:", charged, "rows:", rows)
	// Output:
	// in the caller's tx: false card declined
	// redelivery: true <nil>
	// charged: 10 rows: 2
}

// Sequences with gaps applied and reported (inbox.ApplyGaps), for a
// transport that keeps each producer's order: a gap means lost messages.
func ExampleInbox_HandleSequence() {
	ctx := context.Background()
	db, cleanup, err := exampleDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	ib, err := inboxmysql.New(db, &inbox.Config{Gaps: inbox.ApplyGaps})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, seq := range []int64{1, 2, 2, 5, 3} {
		res, err := ib.HandleSequence(ctx, "billing", "orders-7f3a", seq, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE totals SET charged = charged + ? WHERE id = 1", seq)
			return err
		})
		switch {
		case err != nil:
			fmt.Println(seq, err)
		case res.Gap != nil:
			fmt.Printf("%d applied after a gap: missing %d..%d\n", seq, res.Gap.From, res.Gap.To)
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
	// 5 applied after a gap: missing 3..4
	// 3 duplicate
}

// A five-minute dedup window with an injected clock; Reap deletes the
// entries that have expired.
func ExampleNew() {
	ctx := context.Background()
	db, cleanup, err := exampleDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ib, err := inboxmysql.New(db, &inbox.Config{Window: 5 * time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	handle := func(id string) {
		processed, err := ib.Handle(ctx, "billing", id, func(context.Context, *sql.Tx) error { return nil })
		fmt.Println(now.Format("15:04"), id, processed, err)
	}
	handle("m1")
	now = now.Add(5 * time.Minute)
	handle("m2")
	n, err := ib.Reap(ctx)
	fmt.Println("reaped", n, err)
	handle("m1")
	handle("m2")
	// Output:
	// 12:00 m1 true <nil>
	// 12:05 m2 true <nil>
	// reaped 1 <nil>
	// 12:05 m1 true <nil>
	// 12:05 m2 false <nil>
}
