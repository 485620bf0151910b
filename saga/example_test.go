package saga_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/sagapg"
)

// The examples keep their instances in a temporary copy of the toolkit's
// concurkit_sagas table on one PostgreSQL connection (the server of
// scripts/services.sh, or CONCURKIT_POSTGRES_URL), so they leave nothing
// behind. A missing server prints the error, never fails the test binary.
func exampleStore(ctx context.Context) (*sagapg.Store, func(), error) {
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	fsys, err := migrations.FS(migrations.Postgres)
	if err != nil {
		return nil, nil, err
	}
	ddl, err := fs.ReadFile(fsys, "0004_saga.up.sql")
	if err != nil {
		return nil, nil, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	closeConn := func() { _ = conn.Close(context.WithoutCancel(ctx)) }
	temp := strings.Replace(string(ddl), "CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1)
	if _, err := conn.Exec(ctx, temp); err != nil {
		closeConn()
		return nil, nil, err
	}
	store, err := sagapg.New(conn, nil)
	if err != nil {
		closeConn()
		return nil, nil, err
	}
	return store, closeConn, nil
}

// Transfer is the input of the transfer saga.
type Transfer struct {
	From, To string
	Amount   int
}

// bank stands for outside services that take an idempotency key: a
// request repeated with the same key has its first effect only.
type bank struct{ applied map[string]bool }

func (b *bank) do(key, what string) string {
	if !b.applied[key] {
		b.applied[key] = true
		fmt.Println(what)
	}
	return "tx-" + key
}

// Example moves money in three steps. A retry of the same key returns the
// stored outputs and calls nothing.
func Example() {
	ctx := context.Background()
	store, done, err := exampleStore(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	b := &bank{applied: map[string]bool{}}
	transfer, err := saga.New("transfer", 1, nil,
		saga.NewStep("debit",
			func(ctx context.Context, c *saga.Call[Transfer]) (string, error) {
				return b.do(c.Key, fmt.Sprintf("debit %s %d", c.Input.From, c.Input.Amount)), nil
			},
			func(ctx context.Context, c *saga.Call[Transfer], tx string) error {
				b.do(c.Key+":undo", "refund "+tx)
				return nil
			}),
		saga.NewStep("credit",
			func(ctx context.Context, c *saga.Call[Transfer]) (string, error) {
				return b.do(c.Key, fmt.Sprintf("credit %s %d", c.Input.To, c.Input.Amount)), nil
			},
			func(ctx context.Context, c *saga.Call[Transfer], tx string) error {
				b.do(c.Key+":undo", "reverse "+tx)
				return nil
			}),
		saga.NewStep("notify",
			func(ctx context.Context, c *saga.Call[Transfer]) (struct{}, error) {
				b.do(c.Key, "notify "+c.Input.To)
				return struct{}{}, nil
			}, nil), // nothing to undo
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		res, err := transfer.Run(ctx, store, "transfer-42", Transfer{From: "alice", To: "bob", Amount: 10})
		if err != nil {
			fmt.Println(err)
			return
		}
		var debit string
		_ = res.Output("debit", &debit)
		fmt.Println("replayed:", res.Replayed, "debit:", debit)
	}
	// Output:
	// debit alice 10
	// credit bob 10
	// notify bob
	// replayed: false debit: tx-transfer-42:debit
	// replayed: true debit: tx-transfer-42:debit
}

// A step fails: the steps before it are compensated, last first, and the
// saga's outcome is stored. Running it again returns the same failure
// without calling anything.
func ExampleDefinition_Run() {
	ctx := context.Background()
	store, done, err := exampleStore(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	step := func(name string, fail error) saga.Step[string] {
		return saga.NewStep(name,
			func(ctx context.Context, c *saga.Call[string]) (string, error) {
				if fail != nil {
					return "", fail
				}
				fmt.Println("do", c.Key)
				return name + "-id", nil
			},
			func(ctx context.Context, c *saga.Call[string], id string) error {
				fmt.Println("undo", c.Key, id)
				return nil
			})
	}
	order, err := saga.New("order", 1, nil,
		step("reserve", nil), step("charge", nil), step("ship", errors.New("address rejected")), step("email", nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		_, err = order.Run(ctx, store, "order-7", "input")
		var fe *saga.FailedError
		if errors.As(err, &fe) {
			fmt.Println(errors.Is(err, saga.ErrCompensated), fe.Step, fe.Err)
		}
	}
	// Output:
	// do order-7:reserve
	// do order-7:charge
	// undo order-7:charge charge-id
	// undo order-7:reserve reserve-id
	// true ship address rejected
	// true ship address rejected
}

// Each step gets its own key, derived from the saga's, and reads the
// outputs of the steps before it.
func ExampleNewStep() {
	ctx := context.Background()
	store, done, err := exampleStore(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	type Booking struct{ Flight, Hotel string }
	trip, err := saga.New("trip", 1, nil,
		saga.NewStep("flight", func(ctx context.Context, c *saga.Call[string]) (Booking, error) {
			return Booking{Flight: "LH400"}, nil
		}, nil),
		saga.NewStep("hotel", func(ctx context.Context, c *saga.Call[string]) (Booking, error) {
			var prev Booking
			if err := c.Output("flight", &prev); err != nil {
				return Booking{}, err
			}
			fmt.Println(c.Key, "attempt", c.Attempt, "after flight", prev.Flight)
			return Booking{Flight: prev.Flight, Hotel: "Adlon"}, nil
		}, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := trip.Run(ctx, store, "trip-1", "Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	var b Booking
	_ = res.Output("hotel", &b)
	fmt.Printf("%+v\n", b)
	// Output:
	// trip-1:hotel attempt 1 after flight LH400
	// {Flight:LH400 Hotel:Adlon}
}

// A transient failure (a timeout, a 503) marked Retryable is retried with
// the same step key under Config.Retry instead of failing the saga.
func ExampleRetryable() {
	ctx := context.Background()
	store, done, err := exampleStore(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	calls := 0
	d, err := saga.New("flaky", 1, nil, saga.NewStep("call", func(ctx context.Context, c *saga.Call[int]) (int, error) {
		if calls++; calls < 3 {
			return 0, saga.Retryable(errors.New("503 service unavailable"))
		}
		return 200, nil
	}, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := d.Run(ctx, store, "flaky-1", 0)
	var status int
	if err == nil {
		err = res.Output("call", &status)
	}
	fmt.Println(status, calls, err)
	// Output: 200 3 <nil>
}
