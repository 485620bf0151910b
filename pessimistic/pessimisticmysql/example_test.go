package pessimisticmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
)

// The examples connect to the servers of scripts/services.sh (or the
// CONCURKIT_MYSQL_DSN override) and work in a throwaway database.

// exampleMySQL creates a throwaway database with the example tables and
// returns a handle on it, one connection of that handle, and a cleanup.
// The examples print its error and return rather than log.Fatal, which
// would end the whole test binary when a server is missing.
func exampleMySQL() (db *sql.DB, conn *sql.Conn, cleanup func(), err error) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(envOr("CONCURKIT_MYSQL_DSN", "root@tcp(127.0.0.1:13306)/"))
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.MultiStatements = true
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, nil, err
	}
	name := fmt.Sprintf("ck_example_%x", rand.Uint64())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, nil, nil, err
	}
	cleanup = func() {
		if conn != nil {
			conn.Close()
		}
		if db != nil {
			db.Close()
		}
		_, _ = admin.ExecContext(ctx, "DROP DATABASE "+name)
		admin.Close()
	}
	cfg.DBName = name
	if db, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if conn, err = db.Conn(ctx); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	_, err = conn.ExecContext(ctx, `
CREATE TABLE inventory (id BIGINT PRIMARY KEY, sku VARCHAR(64) NOT NULL, stock INT NOT NULL) ENGINE=InnoDB;
CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT NOT NULL, state VARCHAR(16) NOT NULL DEFAULT 'pending', claimed_by VARCHAR(64), claimed_at DATETIME(6)) ENGINE=InnoDB;
CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB;
INSERT INTO inventory VALUES (1, 'lamp', 1), (2, 'desk', 5), (3, 'chair', 0);
INSERT INTO jobs (payload) VALUES ('email alice'), ('email bob'), ('email carol');
INSERT INTO accounts (id, balance) VALUES (1, 100), (2, 0);`)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return db, conn, cleanup, nil
}

var errInsufficient = errors.New("insufficient funds")

// NOWAIT + retry on MariaDB: a locked row makes the transaction back off and
// run again instead of queueing; a 2 s lock timeout bounds plain waits.
func ExampleInTx() {
	ctx := context.Background()
	_, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	lock := pessimistic.Lock{Wait: pessimistic.NoWait}
	clause, _ := pessimisticmysql.Clause(lock)
	opts := &pessimistic.Options{RetryLockNotAvailable: true, LockTimeout: 2 * time.Second}
	err = pessimisticmysql.InTx(ctx, conn, opts, func(ctx context.Context, tx *sql.Tx) error {
		var stock int
		err := tx.QueryRowContext(ctx, "SELECT stock FROM inventory WHERE id = ?"+clause, 2).Scan(&stock)
		if err != nil {
			return pessimisticmysql.MapError(ctx, lock, err) // 1205 under NOWAIT → ErrLockNotAvailable → retried
		}
		_, err = tx.ExecContext(ctx, "UPDATE inventory SET stock = ? WHERE id = ?", stock-1, 2)
		return err
	})
	var stock int
	_ = conn.QueryRowContext(ctx, "SELECT stock FROM inventory WHERE id = 2").Scan(&stock)
	fmt.Println(err, stock)
	// Output:
	// <nil> 4
}

// Multi-row optimistic work: a transfer is two compare-and-swap writes
// (optimisticmysql.Update) that must commit together. InTx makes them one
// unit: if either finds another version (optimistic.ErrConflict), the
// transaction rolls back and the whole closure runs again on fresh reads.
// Here another session changes the payer between our read and our write,
// so the first attempt conflicts and the second succeeds.
func ExampleInTx_optimisticTransfer() {
	ctx := context.Background()
	db, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	accounts := optimistic.Table{Name: "accounts"}

	read := func(ctx context.Context, tx *sql.Tx, id int64) (balance, version int64, err error) {
		err = tx.QueryRowContext(ctx, "SELECT balance, version FROM accounts WHERE id = ?", id).Scan(&balance, &version)
		return balance, version, err
	}
	attempts := 0
	transfer := func(ctx context.Context, tx *sql.Tx) error {
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
			if _, err := db.ExecContext(ctx, "UPDATE accounts SET balance = balance + 5, version = version + 1 WHERE id = 1"); err != nil {
				return err
			}
		}
		if fromBalance < 30 {
			return errInsufficient
		}
		// optimisticmysql.Update: a compare-and-swap in tx.
		if _, err := optimisticmysql.Update(ctx, tx, accounts, 1, fromVersion, map[string]any{"balance": fromBalance - 30}); err != nil {
			return err // ErrConflict: InTx rolls back and runs transfer again
		}
		_, err = optimisticmysql.Update(ctx, tx, accounts, 2, toVersion, map[string]any{"balance": toBalance + 30})
		return err
	}
	err = pessimisticmysql.InTx(ctx, conn, nil, transfer)
	var a, b int64
	_ = conn.QueryRowContext(ctx, "SELECT (SELECT balance FROM accounts WHERE id = 1), (SELECT balance FROM accounts WHERE id = 2)").Scan(&a, &b)
	fmt.Println(err, attempts, a, b, a+b)
	// Output:
	// <nil> 2 75 30 105
}

// A repository function takes a DBTX, so it works both on its own and
// inside a caller's transaction: given the *sql.DB or *sql.Conn, InTx owns
// (and retries) the transaction; given the caller's *sql.Tx, it runs fn
// once inside it and leaves commit and rollback to the caller.
func ExampleInTx_callerTransaction() {
	ctx := context.Background()
	_, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	withdraw := func(ctx context.Context, db pessimisticmysql.DBTX, id, amount int64) error {
		return pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
			var balance int64
			if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ? FOR UPDATE", id).Scan(&balance); err != nil {
				return err
			}
			if balance < amount {
				return errInsufficient
			}
			_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", amount, id)
			return err
		})
	}
	fmt.Println(withdraw(ctx, conn, 1, 30)) // its own transaction: 100 → 70
	err = pessimisticmysql.InTx(ctx, conn, nil, func(ctx context.Context, tx *sql.Tx) error {
		if err := withdraw(ctx, tx, 1, 30); err != nil { // in tx: 70 → 40
			return err
		}
		return withdraw(ctx, tx, 1, 1000) // fails: the caller's transaction rolls back
	})
	var balance int64
	_ = conn.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance)
	fmt.Println(err, balance)
	// Output:
	// <nil>
	// insufficient funds 70
}

// InTxValue returns the closure's value from the attempt that committed.
func ExampleInTxValue() {
	ctx := context.Background()
	_, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	left, err := pessimisticmysql.InTxValue(ctx, conn, nil, func(ctx context.Context, tx *sql.Tx) (int, error) {
		if _, err := tx.ExecContext(ctx, "UPDATE inventory SET stock = stock - 1 WHERE id = ? AND stock > 0", 2); err != nil {
			return 0, err
		}
		var stock int
		err := tx.QueryRowContext(ctx, "SELECT stock FROM inventory WHERE id = ?", 2).Scan(&stock)
		return stock, err
	})
	fmt.Println(left, err)
	// Output:
	// 4 <nil>
}

// While another transaction holds row 1, NOWAIT fails at once and SKIP
// LOCKED leaves it out.
func ExampleLockRows() {
	ctx := context.Background()
	db, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer holder.Rollback()
	if _, err := pessimisticmysql.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
		fmt.Println(err)
		return
	}

	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback()
	_, err = pessimisticmysql.LockRows(ctx, tx, "inventory", "id", []int64{1, 2}, pessimistic.Lock{Wait: pessimistic.NoWait})
	fmt.Println(errors.Is(err, pessimistic.ErrLockNotAvailable))
	ids, err := pessimisticmysql.LockRows(ctx, tx, "inventory", "id", []int64{1, 2}, pessimistic.Lock{Wait: pessimistic.SkipLocked})
	fmt.Println(ids, err)
	// Output:
	// true
	// [2] <nil>
}

func ExampleClause() {
	for _, l := range []pessimistic.Lock{
		{},
		{Strength: pessimistic.ForNoKeyUpdate}, // no such mode: FOR UPDATE
		{Strength: pessimistic.ForShare, Wait: pessimistic.NoWait},
		{Wait: pessimistic.WaitTimeout, Timeout: 1500 * time.Millisecond}, // whole seconds, rounded up
		{Wait: pessimistic.NoWait, Timeout: -time.Second},
	} {
		fmt.Println(pessimisticmysql.Clause(l))
	}
	// Output:
	//  FOR UPDATE <nil>
	//  FOR UPDATE <nil>
	//  LOCK IN SHARE MODE NOWAIT <nil>
	//  FOR UPDATE WAIT 2 <nil>
	//  pessimistic: invalid argument: negative lock timeout -1s
}

// A statement of your own with a NOWAIT clause: MariaDB answers 1205 (the
// lock-wait-timeout number), which only the Lock that built the clause can
// tell from a timeout.
func ExampleMapError() {
	ctx := context.Background()
	db, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "SELECT id FROM inventory WHERE id = 1 FOR UPDATE"); err != nil {
		fmt.Println(err)
		return
	}

	lock := pessimistic.Lock{Wait: pessimistic.NoWait}
	clause, _ := pessimisticmysql.Clause(lock)
	err = pessimisticmysql.InTx(ctx, conn, nil, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "SELECT id FROM inventory WHERE id = 1"+clause)
		return pessimisticmysql.MapError(ctx, lock, err)
	})
	fmt.Println(errors.Is(err, pessimistic.ErrLockNotAvailable), errors.Is(err, pessimistic.ErrLockTimeout))
	// Output:
	// true false
}

func ExampleClaimJobs() {
	ctx := context.Background()
	_, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	for range 3 { // the last round finds nothing to claim
		_ = pessimisticmysql.InTx(ctx, conn, nil, func(ctx context.Context, tx *sql.Tx) error {
			jobs, err := pessimisticmysql.ClaimJobs(ctx, tx, "jobs", 2, &pessimistic.ClaimOptions{Worker: "worker-1"})
			fmt.Println(len(jobs), err)
			return err
		})
	}
	// Output:
	// 2 <nil>
	// 1 <nil>
	// 0 <nil>
}
