package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// durationEdges are the lock timeouts at the edges of the conversion to
// server units, with the value each server must see: rounded up (never 0,
// which means "no timeout"), clamped to the server's maximum.
type durationEdge struct {
	name     string
	d        time.Duration
	pg       string // lock_timeout
	innodb   int64  // innodb_lock_wait_timeout
	wait     string // MariaDB WAIT n clause
	badInput bool
}

var durationEdges = []durationEdge{
	{name: "1ns", d: time.Nanosecond, pg: "1ms", innodb: 1, wait: " FOR UPDATE WAIT 1"},
	{name: "999µs", d: 999 * time.Microsecond, pg: "1ms", innodb: 1, wait: " FOR UPDATE WAIT 1"},
	{name: "1ms", d: time.Millisecond, pg: "1ms", innodb: 1, wait: " FOR UPDATE WAIT 1"},
	{name: "1ms+1ns", d: time.Millisecond + 1, pg: "2ms", innodb: 1, wait: " FOR UPDATE WAIT 1"},
	{name: "1s+1ns", d: time.Second + 1, pg: "1001ms", innodb: 2, wait: " FOR UPDATE WAIT 2"},
	{name: "MaxInt64", d: math.MaxInt64, pg: "2147483647ms", innodb: 100000000, wait: " FOR UPDATE WAIT 31536000"},
	{name: "negative", d: -time.Nanosecond, badInput: true},
}

// TestLockTimeoutEdgesPostgres: Options.LockTimeout as the server sees it
// inside the transaction; zero keeps the server's setting.
func TestLockTimeoutEdgesPostgres(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := t.Context()
	var def string
	if err := pool.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&def); err != nil {
		t.Fatal(err)
	}
	cases := append(slices.Clip(durationEdges), durationEdge{name: "zero (server default)", pg: def})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			err := pessimisticpg.InTx(ctx, pool, &pessimistic.Options{LockTimeout: tc.d}, func(ctx context.Context, tx pgx.Tx) error {
				return tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&got)
			})
			if tc.badInput {
				if !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Fatalf("err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil || got != tc.pg {
				t.Fatalf("lock_timeout = %q, %v; want %q", got, err, tc.pg)
			}
		})
	}
}

// TestLockTimeoutEdgesMariaDB: Options.LockTimeout as the server sees it
// inside the transaction (innodb_lock_wait_timeout), and the WAIT n clause
// of WaitTimeout, which the server must accept.
func TestLockTimeoutEdgesMariaDB(t *testing.T) {
	db := myDB(t, 2)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1)"); err != nil {
		t.Fatal(err)
	}
	var def int64
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&def); err != nil {
		t.Fatal(err)
	}
	cases := append(slices.Clip(durationEdges), durationEdge{name: "zero (server default)", innodb: def})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got int64
			lock := pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: tc.d}
			err := pessimisticmysql.InTx(ctx, db, &pessimistic.Options{LockTimeout: tc.d}, func(ctx context.Context, tx *sql.Tx) error {
				if err := tx.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&got); err != nil {
					return err
				}
				if tc.d == 0 {
					return nil
				}
				// The server takes the clause (the row is free).
				_, err := pessimisticmysql.LockRows(ctx, tx, "inventory", "id", []int64{1}, lock)
				return err
			})
			if tc.badInput {
				if !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Fatalf("err = %v, want ErrInvalidArgument", err)
				}
				if _, err := pessimisticmysql.Clause(lock); !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Fatalf("clause err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil || got != tc.innodb {
				t.Fatalf("innodb_lock_wait_timeout = %d, %v; want %d", got, err, tc.innodb)
			}
			if tc.d == 0 {
				return
			}
			if clause, err := pessimisticmysql.Clause(lock); err != nil || clause != tc.wait {
				t.Fatalf("clause = %q, %v; want %q", clause, err, tc.wait)
			}
		})
	}
}

// TestHugeWaitTimeoutWaitsPostgres: LockRows with WaitTimeout of
// math.MaxInt64 waits (here until the caller's deadline), rather than
// timing out after 1 ms as an overflowed conversion did.
func TestHugeWaitTimeoutWaitsPostgres(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	if _, err := pessimisticpg.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = pessimisticpg.InTx(wctx, pool, &pessimistic.Options{Retry: once}, func(ctx context.Context, tx pgx.Tx) error {
		_, err := pessimisticpg.LockRows(ctx, tx, "inventory", "id", []int64{1}, pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: math.MaxInt64})
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Fatalf("err = %v, want the caller's deadline (a server timeout of 1 ms means the duration overflowed)", err)
	}
}
