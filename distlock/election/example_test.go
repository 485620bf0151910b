package election_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock/election"
	"github.com/concurkit/concurkit/distlock/election/electionpg"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/migrations"
)

// The examples elect on PostgreSQL (distlock/pglock) — any concurkit
// Locker works the same — reached through CONCURKIT_POSTGRES_URL or the
// port of scripts/services.sh, in a schema of their own.
func exampleURL() string {
	if v := os.Getenv("CONCURKIT_POSTGRES_URL"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
}

// examplePool returns a pool on a new schema holding the toolkit's
// election board and a totals table with a fencing-token column, and a
// function that drops it.
func examplePool(ctx context.Context) (*pgxpool.Pool, func(), error) {
	admin, err := pgx.Connect(ctx, exampleURL())
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close(ctx)
	schema := fmt.Sprintf("example_%d", rand.Uint32())
	fsys, err := migrations.FS(migrations.Postgres)
	if err != nil {
		return nil, nil, err
	}
	board, err := fs.ReadFile(fsys, "0006_election.up.sql")
	if err != nil {
		return nil, nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, err
	}
	drop := func() { _, _ = pgxExec(exampleURL(), "DROP SCHEMA "+schema+" CASCADE") }
	cfg, err := pgxpool.ParseConfig(exampleURL())
	if err != nil {
		drop()
		return nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, string(board)+`;
		CREATE TABLE totals (id text PRIMARY KEY, ran_by text NOT NULL, max_seen_token bigint NOT NULL DEFAULT 0)`); err != nil {
		pool.Close()
		drop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); drop() }, nil
}

func pgxExec(url, sql string) (int64, error) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	tag, err := c.Exec(ctx, sql)
	return tag.RowsAffected(), err
}

// Three replicas of a service campaign; the one elected proclaims its
// address on the board, and writes with its term, which storage checks:
// a deposed leader's late write would be refused.
func Example() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	board, err := electionpg.NewBoard(pool, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := election.New(locker, "billing-primary", &election.Config{Board: board})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Campaign blocks until elected, then proclaims the address on the board.
	term, err := e.Campaign(ctx, "10.0.0.7:8080")
	if err == nil { // lead: write with the term; stop when term.Context() ends
		err = fencedpg.Write(term.Context(), pool, fenced.Table{Name: "totals"}, "nightly", term.Number(),
			map[string]any{"ran_by": "10.0.0.7"})
	}
	fmt.Println("write:", err)
	if term == nil {
		return
	}
	leader, err := e.Leader(ctx)
	fmt.Println("leader:", leader.Value, leader.Term == term.Number(), err)
	if err := term.Resign(ctx); err != nil {
		fmt.Println(err)
	}
	leader, _ = e.Leader(ctx)
	fmt.Println("vacated:", leader.Vacated)
	// Output:
	// write: <nil>
	// leader: 10.0.0.7:8080 true <nil>
	// vacated: true
}

// Four workers run Lead; the nightly job runs once, in whichever was
// elected, and the others stop waiting when the job is done.
func ExampleElection_Lead() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	jobDone, finish := context.WithCancel(ctx)
	defer finish()
	var (
		wg   sync.WaitGroup
		runs atomic.Int32
	)
	for w := range 4 {
		wg.Go(func() {
			locker, err := pglock.New(pool, nil)
			if err != nil {
				fmt.Println(err)
				return
			}
			e, err := election.New(locker, "nightly", nil)
			if err != nil {
				fmt.Println(err)
				return
			}
			err = e.Lead(jobDone, fmt.Sprint(w), func(ctx context.Context, term *election.Term) error {
				if ctx.Err() != nil {
					return ctx.Err() // elected after the job was done
				}
				defer finish()
				runs.Add(1)
				return fencedpg.Write(ctx, pool, fenced.Table{Name: "totals"}, "nightly", term.Number(),
					map[string]any{"ran_by": fmt.Sprint("worker ", w)})
			})
			if err != nil && jobDone.Err() == nil {
				fmt.Println(err)
			}
		})
	}
	wg.Wait()
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM totals").Scan(&rows); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("runs:", runs.Load(), "rows:", rows)
	// Output: runs: 1 rows: 1
}

// An observer follows the leaders of an election without campaigning.
func ExampleElection_Observe() {
	ctx := context.Background()
	pool, done, err := examplePool(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	board, err := electionpg.NewBoard(pool, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := election.New(locker, "scheduler", &election.Config{Board: board, PollInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	leaders, err := e.Observe(octx)
	if err != nil {
		fmt.Println(err)
		return
	}
	term, err := e.Campaign(ctx, "node-a")
	if err != nil {
		fmt.Println(err)
		return
	}
	l := <-leaders
	fmt.Println(l.Value, l.Vacated)
	_ = term.Resign(ctx)
	l = <-leaders
	fmt.Println(l.Value, l.Vacated)
	// Output:
	// node-a false
	// node-a true
}
