package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/redact"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/retry"
)

// errSoldOut is a buyer's normal way to lose: the stock was already 0.
var errSoldOut = errors.New("sold out")

// demoTable is the example inventory table of migrations.UpExamples.
var demoTable = optimistic.Table{Name: "inventory", KeyColumn: "id", VersionColumn: "version"}

// outcome counts what the buyers of one run saw.
type outcome struct {
	won, soldOut, failed atomic.Int64
	retries              atomic.Int64
	winner               atomic.Int64 // buyer number + 1 of the winner (0: none)
	firstErr             atomic.Value
}

func (o *outcome) record(buyer int, err error) {
	switch {
	case err == nil:
		o.won.Add(1)
		o.winner.Store(int64(buyer) + 1)
	case errors.Is(err, errSoldOut):
		o.soldOut.Add(1)
	default:
		o.failed.Add(1)
		o.firstErr.CompareAndSwap(nil, err.Error())
	}
}

// strategy buys the last unit once on behalf of one buyer.
type strategy struct {
	db, name string
	buy      func(ctx context.Context, policy retry.Policy) error
	reset    func(ctx context.Context) error        // stock back to 1
	stock    func(ctx context.Context) (int, error) // stock after the race
}

// Where demo finds its databases when --postgres / --mysql are not given.
const (
	envPostgres     = "CONCURKIT_POSTGRES_URL"
	envMySQL        = "CONCURKIT_MYSQL_DSN"
	defaultPostgres = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	defaultMySQL    = "root@tcp(127.0.0.1:13306)/"
)

func demoCommand() *command {
	return &command{
		name:    "demo",
		summary: "64 concurrent buyers race for the last item under each strategy",
		args:    "[flags]",
		about: `Runs, on PostgreSQL and MariaDB/MySQL, one race per concurrency strategy
(optimistic CAS, SELECT ... FOR UPDATE, NOWAIT + retry, SERIALIZABLE + retry):
--buyers goroutines, each on its own connection, released together, try to buy
the last unit of one item. Every strategy must end with exactly one winner and
stock 0; the command fails otherwise. It creates the schema/database --schema
with the example tables (migrations.UpExamples) and writes no files.

--postgres and --mysql default to $` + envPostgres + ` and $` + envMySQL + `, else to
the test servers of scripts/services.sh; an explicit empty value skips that
database. Passwords are never printed.`,
		example: `concurkit demo
concurkit demo --buyers 16 --mysql '' --postgres 'postgres://app@db:5432/app?sslmode=disable'`,
		run: runDemo,
	}
}

func runDemo(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) (err error) {
	fs := c.flagSet()
	buyers := fs.Int("buyers", 64, "concurrent buyers, each on its own connection (2 to 1000)")
	// No default value in the flag itself: -h would print it, and with it
	// the password of a URL taken from the environment.
	pgURL := fs.String("postgres", "", "PostgreSQL URL (default $"+envPostgres+", else "+defaultPostgres+"; '' skips PostgreSQL)")
	myDSN := fs.String("mysql", "", "MariaDB/MySQL DSN (default $"+envMySQL+", else "+defaultMySQL+"; '' skips MariaDB)")
	schema := fs.String("schema", "concurkit_demo", "PostgreSQL schema and MariaDB database the demo creates and uses")
	if err := c.parse(fs, args, stdout); err != nil {
		return err
	}
	if !isSet(fs, "postgres") {
		*pgURL = envOr(envPostgres, defaultPostgres)
	}
	if !isSet(fs, "mysql") {
		*myDSN = envOr(envMySQL, defaultMySQL)
	}
	// Driver errors may quote a connection string.
	defer func() { err = redact.Error(err, *pgURL, *myDSN) }()
	switch {
	case *buyers < 2 || *buyers > 1000:
		return c.flagErr("buyers", "must be in [2, 1000], got %d", *buyers)
	case *schema == "":
		return c.flagErr("schema", "empty name")
	case *pgURL == "" && *myDSN == "":
		return usagef(c.name, "concurkit demo: --postgres and --mysql are both empty: nothing to race on")
	}
	for _, quote := range []func(...string) (string, error){ident.Postgres, ident.MySQL} {
		if _, err := quote(*schema); err != nil {
			return c.flagErr("schema", "%v", err)
		}
	}
	var strategies []strategy
	if *pgURL != "" {
		pool, err := demoPostgres(ctx, *pgURL, *schema, *buyers)
		if err != nil {
			return err
		}
		defer pool.Close()
		strategies = append(strategies, postgresStrategies(pool)...)
	}
	if *myDSN != "" {
		db, err := demoMySQL(ctx, *myDSN, *schema, *buyers)
		if err != nil {
			return err
		}
		defer db.Close()
		strategies = append(strategies, mysqlStrategies(db)...)
	}
	fmt.Fprintf(stdout, "%d buyers race for the last unit of one item, each strategy on a fresh row.\n\n", *buyers)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "database\tstrategy\twinners\tsold out\terrors\tretries\tfinal stock\twinner\ttime")
	var bad []string
	for _, s := range strategies {
		o, stock, elapsed, err := race(ctx, s, *buyers)
		if err != nil {
			return fmt.Errorf("demo %s %s: %w", s.db, s.name, err)
		}
		winner := "-"
		if w := o.winner.Load(); w > 0 {
			winner = fmt.Sprintf("buyer #%d", w-1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.db, s.name, o.won.Load(), o.soldOut.Load(), o.failed.Load(), o.retries.Load(), stock, winner, elapsed.Round(time.Millisecond))
		if o.won.Load() != 1 || stock != 0 {
			bad = append(bad, s.db+" "+s.name)
		}
		if e, ok := o.firstErr.Load().(string); ok {
			fmt.Fprintf(stderr, "%s %s: first error: %s\n", s.db, s.name, e)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("demo: oversold or unsold under %s", strings.Join(bad, ", "))
	}
	fmt.Fprintln(stdout, "\nExactly one buyer won under every strategy; stock never went below 0.")
	return nil
}

// race resets the item to stock 1 and lets n buyers, released together by
// a barrier, try to buy it.
func race(ctx context.Context, s strategy, n int) (*outcome, int, time.Duration, error) {
	o := new(outcome)
	policy := retry.Policy{MaxAttempts: 100, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}
	// Count the retries (not the final give-up) through the observe hooks.
	ctx = observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			o.retries.Add(1)
		}
	}})
	if err := s.reset(ctx); err != nil {
		return nil, 0, 0, err
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			o.record(i, s.buy(ctx, policy))
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	stock, err := s.stock(ctx)
	return o, stock, elapsed, err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
