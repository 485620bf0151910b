package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/pessimistic"
)

// The examples connect to the servers of scripts/services.sh (or the
// CONCURKIT_POSTGRES_URL / CONCURKIT_MYSQL_DSN overrides) and work on
// temporary tables, which belong to their connection only.

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
INSERT INTO inventory VALUES (1, 'lamp', 1), (2, 'desk', 5), (3, 'chair', 0);
INSERT INTO jobs (payload) VALUES ('email alice'), ('email bob'), ('email carol');`)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// exampleMySQL creates a throwaway database and returns a handle on it, one
// connection of that handle holding the temporary tables, and a cleanup.
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
CREATE TEMPORARY TABLE inventory (id BIGINT PRIMARY KEY, sku VARCHAR(64) NOT NULL, stock INT NOT NULL) ENGINE=InnoDB;
CREATE TEMPORARY TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT NOT NULL, state VARCHAR(16) NOT NULL DEFAULT 'pending', claimed_by VARCHAR(64), claimed_at DATETIME(6)) ENGINE=InnoDB;
INSERT INTO inventory VALUES (1, 'lamp', 1), (2, 'desk', 5), (3, 'chair', 0);
INSERT INTO jobs (payload) VALUES ('email alice'), ('email bob'), ('email carol');`)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return db, conn, cleanup, nil
}

var errSoldOutExample = errors.New("sold out")

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
	// nil options: server isolation, deadlocks and serialization failures retried.
	fmt.Println(pessimistic.InTx(ctx, conn, nil, buy))
	fmt.Println(pessimistic.InTx(ctx, conn, nil, buy))
	// Output:
	// <nil>
	// sold out
}

// NOWAIT + retry on MariaDB: a locked row makes the transaction back off and
// run again instead of queueing; a 2 s lock timeout bounds plain waits.
func ExampleInTxMySQL() {
	ctx := context.Background()
	_, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	lock := pessimistic.Lock{Wait: pessimistic.NoWait}
	clause, _ := lock.MySQL()
	opts := &pessimistic.Options{RetryLockNotAvailable: true, LockTimeout: 2 * time.Second}
	err = pessimistic.InTxMySQL(ctx, conn, opts, func(ctx context.Context, tx *sql.Tx) error {
		var stock int
		err := tx.QueryRowContext(ctx, "SELECT stock FROM inventory WHERE id = ?"+clause, 2).Scan(&stock)
		if err != nil {
			return lock.MapError(ctx, err) // 1205 under NOWAIT → ErrLockNotAvailable → retried
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

// Lock a set of rows in key order; missing keys are simply absent.
func ExampleLockRows() {
	ctx := context.Background()
	conn, err := examplePG()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	_ = pessimistic.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		ids, err := pessimistic.LockRows(ctx, tx, "inventory", "id", []int64{3, 1, 9}, pessimistic.Lock{})
		fmt.Println(ids, err)
		return err
	})
	// Output:
	// [1 3] <nil>
}

// While another transaction holds row 1, NOWAIT fails at once and SKIP
// LOCKED leaves it out.
func ExampleLockRowsMySQL() {
	ctx := context.Background()
	db, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	// A second session on a real table (temporary tables are per session).
	if _, err := conn.ExecContext(ctx, "CREATE TABLE example_rows (id BIGINT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO example_rows VALUES (1), (2)"); err != nil {
		fmt.Println(err)
		return
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer holder.Rollback()
	if _, err := pessimistic.LockRowsMySQL(ctx, holder, "example_rows", "id", []int64{1}, pessimistic.Lock{}); err != nil {
		fmt.Println(err)
		return
	}

	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback()
	_, err = pessimistic.LockRowsMySQL(ctx, tx, "example_rows", "id", []int64{1, 2}, pessimistic.Lock{Wait: pessimistic.NoWait})
	fmt.Println(errors.Is(err, pessimistic.ErrLockNotAvailable))
	ids, err := pessimistic.LockRowsMySQL(ctx, tx, "example_rows", "id", []int64{1, 2}, pessimistic.Lock{Wait: pessimistic.SkipLocked})
	fmt.Println(ids, err)
	// Output:
	// true
	// [2] <nil>
}

func ExampleLock_Postgres() {
	for _, l := range []pessimistic.Lock{
		{},
		{Strength: pessimistic.ForNoKeyUpdate, Wait: pessimistic.NoWait},
		{Strength: pessimistic.ForShare, Wait: pessimistic.SkipLocked},
		{Wait: pessimistic.WaitTimeout, Timeout: time.Second}, // lock_timeout does the waiting
		{Wait: pessimistic.WaitTimeout},                       // no timeout: invalid
	} {
		fmt.Println(l.Postgres())
	}
	// Output:
	//  FOR UPDATE <nil>
	//  FOR NO KEY UPDATE NOWAIT <nil>
	//  FOR SHARE SKIP LOCKED <nil>
	//  FOR UPDATE <nil>
	//  pessimistic: invalid argument: WaitTimeout needs a positive Timeout
}

func ExampleLock_MySQL() {
	for _, l := range []pessimistic.Lock{
		{},
		{Strength: pessimistic.ForNoKeyUpdate}, // no such mode: FOR UPDATE
		{Strength: pessimistic.ForShare, Wait: pessimistic.NoWait},
		{Wait: pessimistic.WaitTimeout, Timeout: 1500 * time.Millisecond}, // whole seconds, rounded up
		{Wait: pessimistic.NoWait, Timeout: -time.Second},
	} {
		fmt.Println(l.MySQL())
	}
	// Output:
	//  FOR UPDATE <nil>
	//  FOR UPDATE <nil>
	//  LOCK IN SHARE MODE NOWAIT <nil>
	//  FOR UPDATE WAIT 2 <nil>
	//  pessimistic: invalid argument: negative lock timeout -1s
}

func ExampleLock_Validate() {
	fmt.Println(pessimistic.Lock{Wait: pessimistic.SkipLocked}.Validate())
	fmt.Println(pessimistic.Lock{Wait: pessimistic.NoWait, Timeout: time.Second}.Validate())
	// Output:
	// <nil>
	// pessimistic: invalid argument: Timeout 1s set with wait policy NoWait (use WaitTimeout)
}

// A statement of your own with a NOWAIT clause, its error mapped by the
// Lock that built the clause.
func ExampleLock_MapError() {
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
	if _, err := pessimistic.LockRows(ctx, tx, table, "id", []int{1}, pessimistic.Lock{}); err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback(ctx)

	lock := pessimistic.Lock{Wait: pessimistic.NoWait}
	clause, _ := lock.Postgres()
	err = pessimistic.InTx(ctx, other, nil, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT id FROM "+table+" WHERE id = 1"+clause)
		return lock.MapError(ctx, err)
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

	_ = pessimistic.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		jobs, err := pessimistic.ClaimJobs(ctx, tx, "jobs", 2, &pessimistic.ClaimOptions{Worker: "worker-1"})
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

func ExampleClaimJobsMySQL() {
	ctx := context.Background()
	_, conn, cleanup, err := exampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	for range 3 { // the last round finds nothing to claim
		_ = pessimistic.InTxMySQL(ctx, conn, nil, func(ctx context.Context, tx *sql.Tx) error {
			jobs, err := pessimistic.ClaimJobsMySQL(ctx, tx, "jobs", 2, &pessimistic.ClaimOptions{Worker: "worker-1"})
			fmt.Println(len(jobs), err)
			return err
		})
	}
	// Output:
	// 2 <nil>
	// 1 <nil>
	// 0 <nil>
}

func ExampleAdvisoryKey() {
	fmt.Println(pessimistic.AdvisoryKey("invoice-run/2026-11"))
	fmt.Println(pessimistic.AdvisoryKey("") == -3750763034362895579) // the FNV-1a offset basis
	// Output:
	// 719251178613877432
	// true
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

	err = pessimistic.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		if err := pessimistic.AdvisoryXactLock(ctx, tx, key); err != nil {
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

	_ = pessimistic.InTx(ctx, a, nil, func(ctx context.Context, tx pgx.Tx) error {
		fmt.Println("a:", pessimistic.TryAdvisoryXactLock(ctx, tx, key))
		err := pessimistic.InTx(ctx, b, nil, func(ctx context.Context, tx pgx.Tx) error {
			return pessimistic.TryAdvisoryXactLock(ctx, tx, key)
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

	l, err := pessimistic.AdvisoryLock(ctx, conn, key)
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

	la, err := pessimistic.TryAdvisoryLock(ctx, a, key)
	fmt.Println("a:", err)
	_, err = pessimistic.TryAdvisoryLock(ctx, b, key)
	fmt.Println("b:", err)
	_ = la.Release(ctx)
	lb, err := pessimistic.TryAdvisoryLock(ctx, b, key)
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
	l, err := pessimistic.TryAdvisoryLock(ctx, conn, pessimistic.AdvisoryKey(fmt.Sprintf("x/%x", rand.Uint64())))
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
