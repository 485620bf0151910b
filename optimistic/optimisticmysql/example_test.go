package optimisticmysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
)

// The examples connect to the servers of scripts/services.sh (or the
// CONCURKIT_* variables) and work on session-private temporary tables, or a
// uniquely named DynamoDB table, so they can run next to the tests.

func exampleEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// exampleMySQL opens one connection holding a temporary counters table with
// counter 1 (value 0, version 1).
func exampleMySQL(ctx context.Context) (*sql.DB, *sql.Conn, error) {
	cfg, err := mysql.ParseDSN(exampleEnv("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/"))
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	conn, err := db.Conn(ctx)
	if err == nil {
		for _, stmt := range []string{
			"CREATE DATABASE IF NOT EXISTS concurkit_examples",
			"USE concurkit_examples",
			"CREATE TEMPORARY TABLE counters (id BIGINT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB",
			"INSERT INTO counters (id) VALUES (1)",
		} {
			if _, err = conn.ExecContext(ctx, stmt); err != nil {
				break
			}
		}
	}
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, conn, nil
}

func ExampleUpdate() {
	ctx := context.Background()
	db, conn, err := exampleMySQL(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	defer conn.Close()

	counters := optimistic.Table{Name: "counters", KeyColumn: "id", VersionColumn: "version"}
	v, err := optimisticmysql.Update(ctx, conn, counters, 1, 1, map[string]any{"value": 1})
	fmt.Println(v, err)
	_, err = optimisticmysql.Update(ctx, conn, counters, 1, 1, map[string]any{"value": 1})
	fmt.Println(errors.Is(err, optimistic.ErrConflict))
	_, err = optimisticmysql.Update(ctx, conn, counters, 2, 1, nil)
	fmt.Println(errors.Is(err, optimistic.ErrNotFound))
	// Output:
	// 2 <nil>
	// true
	// true
}

// ExampleUpdate_cancelled shows what a deadline means for a CAS on a
// *sql.DB that waits behind another transaction's lock: Update stops
// the statement on the server before it returns, so the caller can rely on
// "not updated" — unless the error is a *concurkit.AmbiguousCommitError, whose
// outcome could not be confirmed and must be checked by reading the row.
func ExampleUpdate_cancelled() {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(exampleEnv("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	// Two connections must see the table: a real one, uniquely named.
	b := make([]byte, 6)
	rand.Read(b)
	tbl := optimistic.Table{Schema: "concurkit_examples", Name: "cancelled_" + hex.EncodeToString(b), KeyColumn: "id", VersionColumn: "version"}
	name := tbl.Schema + "." + tbl.Name
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS concurkit_examples",
		"CREATE TABLE " + name + " (id BIGINT PRIMARY KEY, stock INT NOT NULL, version BIGINT NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			fmt.Println(err)
			return
		}
	}
	defer db.ExecContext(ctx, "DROP TABLE "+name)
	if _, err := db.ExecContext(ctx, "INSERT INTO "+name+" VALUES (1, 10, 1)"); err != nil {
		fmt.Println(err)
		return
	}

	// Another transaction holds the row.
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := holder.ExecContext(ctx, "SELECT 1 FROM "+name+" WHERE id = 1 FOR UPDATE"); err != nil {
		fmt.Println(err)
		return
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = optimisticmysql.Update(short, db, tbl, 1, 1, map[string]any{"stock": 9})
	var amb *concurkit.AmbiguousCommitError
	fmt.Println("deadline:", errors.Is(err, context.DeadlineExceeded), "outcome unknown:", errors.As(err, &amb))

	// The holder lets go: the abandoned CAS does not run after all.
	holder.Commit()
	var stock, version int
	db.QueryRowContext(ctx, "SELECT stock, version FROM "+name+" WHERE id = 1").Scan(&stock, &version)
	fmt.Println(stock, version)
	// Output:
	// deadline: true outcome unknown: false
	// 10 1
}
