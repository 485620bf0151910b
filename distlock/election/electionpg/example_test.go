package electionpg_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/distlock/election/electionpg"
	"github.com/concurkit/concurkit/fenced"
)

// A board on a temporary copy of the toolkit's table (a service applies
// the toolkit migrations, migrations.Up, and passes its pool instead).
func ExampleNewBoard() {
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
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE concurkit_elections (name text PRIMARY KEY,
		term bigint NOT NULL DEFAULT 0, value text NOT NULL DEFAULT '', vacated boolean NOT NULL DEFAULT false)`); err != nil {
		fmt.Println(err)
		return
	}
	board, err := electionpg.NewBoard(conn, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(board.Proclaim(ctx, "scheduler", 12, "node-b:9000"))
	err = board.Proclaim(ctx, "scheduler", 11, "node-a:9000") // a deposed leader
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	l, err := board.Leader(ctx, "scheduler")
	fmt.Println(l.Term, l.Value, err)
	// Output:
	// <nil>
	// true
	// 12 node-b:9000 <nil>
}
