package durabilitypg_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/durability"
	"github.com/concurkit/concurkit/durability/durabilitypg"
)

// A session that acknowledges commits before they reach the disk: Check
// says what a crash would cost. (The example connects to the server of
// scripts/services.sh, or CONCURKIT_POSTGRES_URL.)
func ExampleCheck() {
	ctx := context.Background()
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		fmt.Println(err)
		return
	}
	err = durabilitypg.Check(ctx, conn)
	var de *durability.Error
	if errors.As(err, &de) {
		for _, p := range de.Problems {
			if p.Setting == "synchronous_commit" {
				fmt.Println(p)
			}
		}
	}
	// Output: crash: synchronous_commit = off (want on): a commit is acknowledged before its WAL is flushed: a crash loses the last ones
}
