package pessimisticpg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// The examples connect to the servers of scripts/services.sh (or the
// CONCURKIT_POSTGRES_URL override) and work on temporary tables, which
// belong to their connection only, or on tables with random names that
// they drop.

// examplePG connects and creates the example tables. The examples print
// its error and return rather than log.Fatal, which would end the whole
// test binary when a server is missing.
func examplePG() (*pgx.Conn, error) {
	url := envOr("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable")
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(context.Background(), `
CREATE TEMP TABLE inventory (id bigint PRIMARY KEY, sku text NOT NULL, stock integer NOT NULL);
CREATE TEMP TABLE jobs (id bigserial PRIMARY KEY, payload text NOT NULL, state text NOT NULL DEFAULT 'pending', claimed_by text, claimed_at timestamptz);
CREATE TEMP TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, version bigint NOT NULL DEFAULT 1);
INSERT INTO inventory VALUES (1, 'lamp', 1), (2, 'desk', 5), (3, 'chair', 0);
INSERT INTO jobs (payload) VALUES ('email alice'), ('email bob'), ('email carol');
INSERT INTO accounts (id, balance) VALUES (1, 100), (2, 0);`)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

var (
	errSoldOutExample = errors.New("sold out")
	errInsufficient   = errors.New("insufficient funds")
)

// Buy the last lamp under FOR UPDATE: the row lock serializes buyers, so
// the second buyer sees the stock at 0.
func ExampleInTx() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	buy := func(ctx context.Context, tx pgx.Tx) error {
		var stock int
		if err := tx.QueryRow(ctx, "SELECT stock FROM inventory WHERE id = $1 FOR UPDATE", 1).Scan(&stock); err != nil {
			return err
		}
		if stock < 1 {
			return errSoldOutExample
		}
		_, err := tx.Exec(ctx, "UPDATE inventory SET stock = stock - 1 WHERE id = $1", 1)
		return err
	}
	// nil options: server isolation; deadlocks, serialization failures and
	// optimistic conflicts retried.
	fmt.Println(pessimisticpg.InTx(ctx, conn, nil, buy))
	fmt.Println(pessimisticpg.InTx(ctx, conn, nil, buy))
	// Output:
	// <nil>
	// sold out
}

// Multi-row optimistic work: a transfer is two compare-and-swap writes
// (optimisticpg.Update) that must commit together. InTx makes them
// one unit: if either finds another version (optimistic.ErrConflict),
// the transaction rolls back and the whole closure runs again on fresh
// reads. Here another session changes the payer between our read and our
// write, so the first attempt conflicts and the second succeeds.
func ExampleInTx_optimisticTransfer() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	other, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer other.Close(ctx)
	name := fmt.Sprintf("accounts_%x", rand.Uint64()) // a real table: two sessions use it
	if _, err := conn.Exec(ctx, "CREATE TABLE "+name+" (id bigint PRIMARY KEY, balance bigint NOT NULL, version bigint NOT NULL DEFAULT 1); INSERT INTO "+name+" (id, balance) VALUES (1, 100), (2, 0)"); err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Exec(ctx, "DROP TABLE "+name)
	accounts := optimistic.Table{Name: name}

	read := func(ctx context.Context, tx pgx.Tx, id int64) (balance, version int64, err error) {
		err = tx.QueryRow(ctx, "SELECT balance, version FROM "+name+" WHERE id = $1", id).Scan(&balance, &version)
		return balance, version, err
	}
	attempts := 0
	transfer := func(ctx context.Context, tx pgx.Tx) error {
		attempts++
		fromBalance, fromVersion, err := read(ctx, tx, 1)
		if err != nil {
			return err
		}
		toBalance, toVersion, err := read(ctx, tx, 2)
		if err != nil {
			return err
		}
		if attempts == 1 { // a concurrent writer gets in first
			if _, err := other.Exec(ctx, "UPDATE "+name+" SET balance = balance + 5, version = version + 1 WHERE id = 1"); err != nil {
				return err
			}
		}
		if fromBalance < 30 {
			return errInsufficient
		}
		// optimisticpg.Update: a compare-and-swap in tx.
		if _, err := optimisticpg.Update(ctx, tx, accounts, 1, fromVersion, map[string]any{"balance": fromBalance - 30}); err != nil {
			return err // ErrConflict: InTx rolls back and runs transfer again
		}
		_, err = optimisticpg.Update(ctx, tx, accounts, 2, toVersion, map[string]any{"balance": toBalance + 30})
		return err
	}
	err = pessimisticpg.InTx(ctx, conn, nil, transfer)
	var a, b int64
	_ = conn.QueryRow(ctx, "SELECT (SELECT balance FROM "+name+" WHERE id = 1), (SELECT balance FROM "+name+" WHERE id = 2)").Scan(&a, &b)
	fmt.Println(err, attempts, a, b, a+b)
	// Output:
	// <nil> 2 75 30 105
}

// A repository function takes a Beginner, so it works both on its own and
// inside a caller's transaction: given the pool or connection, InTx owns
// (and retries) the transaction; given the caller's pgx.Tx, it runs fn
// once inside a savepoint, which a failure rolls back without aborting the
// caller's transaction.
func ExampleInTx_callerTransaction() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	withdraw := func(ctx context.Context, db pessimisticpg.Beginner, id, amount int64) error {
		return pessimisticpg.InTx(ctx, db, nil, func(ctx context.Context, tx pgx.Tx) error {
			var balance int64
			if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE", id).Scan(&balance); err != nil {
				return err
			}
			if balance < amount {
				return errInsufficient
			}
			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, id)
			return err
		})
	}
	fmt.Println(withdraw(ctx, conn, 1, 30)) // its own transaction: 100 → 70
	err = pessimisticpg.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		if err := withdraw(ctx, tx, 1, 30); err != nil { // in tx: 70 → 40
			return err
		}
		fmt.Println(withdraw(ctx, tx, 1, 1000)) // fails; only its savepoint rolls back
		return nil                              // the caller commits
	})
	var balance int64
	_ = conn.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance)
	fmt.Println(err, balance)
	// Output:
	// <nil>
	// insufficient funds
	// <nil> 40
}

// InTxValue returns the closure's value from the attempt that committed.
func ExampleInTxValue() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	left, err := pessimisticpg.InTxValue(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) (int, error) {
		var stock int
		err := tx.QueryRow(ctx, "UPDATE inventory SET stock = stock - 1 WHERE id = $1 AND stock > 0 RETURNING stock", 2).Scan(&stock)
		return stock, err
	})
	fmt.Println(left, err)
	// Output:
	// 4 <nil>
}

// Lock a set of rows in key order; missing keys are simply absent.
func ExampleLockRows() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	_ = pessimisticpg.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		ids, err := pessimisticpg.LockRows(ctx, tx, "inventory", "id", []int64{3, 1, 9}, pessimistic.Lock{})
		fmt.Println(ids, err)
		return err
	})
	// Output:
	// [1 3] <nil>
}

func ExampleClause() {
	for _, l := range []pessimistic.Lock{
		{},
		{Strength: pessimistic.ForNoKeyUpdate, Wait: pessimistic.NoWait},
		{Strength: pessimistic.ForShare, Wait: pessimistic.SkipLocked},
		{Wait: pessimistic.WaitTimeout, Timeout: time.Second}, // lock_timeout does the waiting
		{Wait: pessimistic.WaitTimeout},                       // no timeout: invalid
	} {
		fmt.Println(pessimisticpg.Clause(l))
	}
	// Output:
	//  FOR UPDATE <nil>
	//  FOR NO KEY UPDATE NOWAIT <nil>
	//  FOR SHARE SKIP LOCKED <nil>
	//  FOR UPDATE <nil>
	//  pessimistic: invalid argument: WaitTimeout needs a positive Timeout
}

// A statement of your own with a NOWAIT clause, its error mapped by the
// Lock that built the clause.
func ExampleMapError() {
	ctx := context.Background()
	holder, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer holder.Close(ctx)
	other, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer other.Close(ctx)
	table := fmt.Sprintf("example_%x", rand.Uint64())
	if _, err := holder.Exec(ctx, "CREATE TABLE "+table+" (id bigint PRIMARY KEY); INSERT INTO "+table+" VALUES (1)"); err != nil {
		fmt.Println(err)
		return
	}
	defer holder.Exec(ctx, "DROP TABLE "+table)

	tx, err := holder.Begin(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := pessimisticpg.LockRows(ctx, tx, table, "id", []int{1}, pessimistic.Lock{}); err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback(ctx)

	lock := pessimistic.Lock{Wait: pessimistic.NoWait}
	clause, _ := pessimisticpg.Clause(lock)
	err = pessimisticpg.InTx(ctx, other, nil, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT id FROM "+table+" WHERE id = 1"+clause)
		return pessimisticpg.MapError(ctx, lock, err)
	})
	var pgErr *pgconn.PgError
	fmt.Println(errors.Is(err, pessimistic.ErrLockNotAvailable), errors.As(err, &pgErr) && pgErr.Code == "55P03")
	// Output:
	// true true
}

// A queue worker claims up to two pending jobs; they stay claimed when the
// transaction commits, and other workers skip them meanwhile.
func ExampleClaimJobs() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	_ = pessimisticpg.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		jobs, err := pessimisticpg.ClaimJobs(ctx, tx, "jobs", 2, &pessimistic.ClaimOptions{Worker: "worker-1"})
		for _, j := range jobs {
			fmt.Println(j.ID, string(j.Payload))
		}
		return err
	})
	var left int
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'pending'").Scan(&left)
	fmt.Println("pending:", left)
	// Output:
	// 1 email alice
	// 2 email bob
	// pending: 1
}

// Only one transaction at a time runs the nightly report; the lock goes
// away with the transaction.
func ExampleAdvisoryXactLock() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	key := pessimistic.AdvisoryKey(fmt.Sprintf("report/%x", rand.Uint64()))

	err = pessimisticpg.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		if err := pessimisticpg.AdvisoryXactLock(ctx, tx, key); err != nil {
			return err
		}
		fmt.Println("running the report")
		return nil
	})
	fmt.Println(err)
	// Output:
	// running the report
	// <nil>
}

func ExampleTryAdvisoryXactLock() {
	ctx := context.Background()
	a, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close(ctx)
	b, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close(ctx)
	key := pessimistic.AdvisoryKey(fmt.Sprintf("report/%x", rand.Uint64()))

	_ = pessimisticpg.InTx(ctx, a, nil, func(ctx context.Context, tx pgx.Tx) error {
		fmt.Println("a:", pessimisticpg.TryAdvisoryXactLock(ctx, tx, key))
		err := pessimisticpg.InTx(ctx, b, nil, func(ctx context.Context, tx pgx.Tx) error {
			return pessimisticpg.TryAdvisoryXactLock(ctx, tx, key)
		})
		fmt.Println("b:", err)
		return nil
	})
	// Output:
	// a: <nil>
	// b: pessimistic: lock not available
}

// A session lock on one dedicated connection, released by its handle.
func ExampleAdvisoryLock() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	key := pessimistic.AdvisoryKey(fmt.Sprintf("migrations/%x", rand.Uint64()))

	l, err := pessimisticpg.AdvisoryLock(ctx, conn, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", l.Key() == key)
	fmt.Println("released:", l.Release(ctx))
	// Output:
	// held: true
	// released: <nil>
}

func ExampleTryAdvisoryLock() {
	ctx := context.Background()
	a, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close(ctx)
	b, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close(ctx)
	key := pessimistic.AdvisoryKey(fmt.Sprintf("leader/%x", rand.Uint64()))

	la, err := pessimisticpg.TryAdvisoryLock(ctx, a, key)
	fmt.Println("a:", err)
	_, err = pessimisticpg.TryAdvisoryLock(ctx, b, key)
	fmt.Println("b:", err)
	_ = la.Release(ctx)
	lb, err := pessimisticpg.TryAdvisoryLock(ctx, b, key)
	fmt.Println("b after a's release:", err)
	_ = lb.Release(ctx)
	// Output:
	// a: <nil>
	// b: pessimistic: lock not available
	// b after a's release: <nil>
}

func ExampleSessionLock_Release() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	l, err := pessimisticpg.TryAdvisoryLock(ctx, conn, pessimistic.AdvisoryKey(fmt.Sprintf("x/%x", rand.Uint64())))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Release(ctx))
	fmt.Println(l.Release(ctx)) // later calls repeat the first result
	// Output:
	// <nil>
	// <nil>
}
