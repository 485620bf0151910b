package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/retry"
)

func TestBadInput(t *testing.T) {
	pool := pgPool(t, 2)
	db := myDB(t, 2)
	ctx := t.Context()
	pgTx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pgTx.Rollback(ctx)
	myTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer myTx.Rollback()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	nop := func(context.Context, pgx.Tx) error { return nil }
	nopSQL := func(context.Context, *sql.Tx) error { return nil }
	keys := []int64{1}
	var nilPool *pgxpool.Pool
	var nilDB *sql.DB
	var nilTx *sql.Tx
	ok := pessimistic.Lock{}
	tooLong := strings.Repeat("x", 64)
	cases := []struct {
		name string
		call func() error
	}{
		{"InTx nil db", func() error { return pessimistic.InTx(ctx, nil, nil, nop) }},
		{"InTx typed nil pool", func() error { return pessimistic.InTx(ctx, nilPool, nil, nop) }},
		{"InTx nil fn", func() error { return pessimistic.InTx(ctx, pool, nil, nil) }},
		{"InTx negative LockTimeout", func() error {
			return pessimistic.InTx(ctx, pool, &pessimistic.Options{LockTimeout: -time.Second}, nop)
		}},
		{"InTx unsupported isolation", func() error {
			return pessimistic.InTx(ctx, pool, &pessimistic.Options{Isolation: sql.LevelSnapshot}, nop)
		}},
		{"InTx negative retry", func() error {
			return pessimistic.InTx(ctx, pool, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: -1}}, nop)
		}},
		{"InTxMySQL nil db", func() error { return pessimistic.InTxMySQL(ctx, nil, nil, nopSQL) }},
		{"InTxMySQL typed nil db", func() error { return pessimistic.InTxMySQL(ctx, nilDB, nil, nopSQL) }},
		{"InTxMySQL nil fn", func() error { return pessimistic.InTxMySQL(ctx, db, nil, nil) }},
		{"InTxMySQL negative LockTimeout", func() error {
			return pessimistic.InTxMySQL(ctx, db, &pessimistic.Options{LockTimeout: -1}, nopSQL)
		}},
		{"InTxMySQL LockTimeout on a handle without its own connections", func() error {
			// Only BeginTx: no connection whose session setting could be restored.
			wrapped := struct{ pessimistic.SQLBeginner }{db}
			return pessimistic.InTxMySQL(ctx, wrapped, &pessimistic.Options{LockTimeout: time.Second}, nopSQL)
		}},
		{"InTxMySQL negative MaxDelay", func() error {
			return pessimistic.InTxMySQL(ctx, db, &pessimistic.Options{Retry: retry.Policy{MaxDelay: -1}}, nopSQL)
		}},
		{"LockRows nil tx", func() error { _, err := pessimistic.LockRows(ctx, nil, "inventory", "id", keys, ok); return err }},
		{"LockRows empty table", func() error { _, err := pessimistic.LockRows(ctx, pgTx, "", "id", keys, ok); return err }},
		{"LockRows empty column", func() error { _, err := pessimistic.LockRows(ctx, pgTx, "inventory", "", keys, ok); return err }},
		{"LockRows NUL in table", func() error { _, err := pessimistic.LockRows(ctx, pgTx, "inv\x00", "id", keys, ok); return err }},
		{"LockRows name too long", func() error { _, err := pessimistic.LockRows(ctx, pgTx, tooLong, "id", keys, ok); return err }},
		{"LockRows negative timeout", func() error {
			_, err := pessimistic.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: -time.Second})
			return err
		}},
		{"LockRows WaitTimeout without timeout", func() error {
			_, err := pessimistic.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.WaitTimeout})
			return err
		}},
		{"LockRows timeout with NoWait", func() error {
			_, err := pessimistic.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.NoWait, Timeout: time.Second})
			return err
		}},
		{"LockRows unknown strength", func() error {
			_, err := pessimistic.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Strength: 9})
			return err
		}},
		{"LockRowsMySQL typed nil tx", func() error {
			_, err := pessimistic.LockRowsMySQL(ctx, nilTx, "inventory", "id", keys, ok)
			return err
		}},
		{"LockRowsMySQL trailing space", func() error {
			_, err := pessimistic.LockRowsMySQL(ctx, myTx, "inventory ", "id", keys, ok)
			return err
		}},
		{"LockRowsMySQL unknown wait", func() error {
			_, err := pessimistic.LockRowsMySQL(ctx, myTx, "inventory", "id", keys, pessimistic.Lock{Wait: 7})
			return err
		}},
		{"LockRowsMySQL too many keys", func() error {
			_, err := pessimistic.LockRowsMySQL(ctx, myTx, "inventory", "id", make([]int64, 70000), ok)
			return err
		}},
		{"ClaimJobs n=0", func() error { _, err := pessimistic.ClaimJobs(ctx, pgTx, "jobs", 0, nil); return err }},
		{"ClaimJobs n<0", func() error { _, err := pessimistic.ClaimJobs(ctx, pgTx, "jobs", -3, nil); return err }},
		{"ClaimJobs nil tx", func() error { _, err := pessimistic.ClaimJobs(ctx, nil, "jobs", 1, nil); return err }},
		{"ClaimJobs empty table", func() error { _, err := pessimistic.ClaimJobs(ctx, pgTx, "", 1, nil); return err }},
		{"ClaimJobs same states", func() error {
			_, err := pessimistic.ClaimJobs(ctx, pgTx, "jobs", 1, &pessimistic.ClaimOptions{Pending: "x", Claimed: "x"})
			return err
		}},
		{"ClaimJobs bad column", func() error {
			_, err := pessimistic.ClaimJobs(ctx, pgTx, "jobs", 1, &pessimistic.ClaimOptions{StateColumn: tooLong})
			return err
		}},
		{"ClaimJobsMySQL n=0", func() error { _, err := pessimistic.ClaimJobsMySQL(ctx, myTx, "jobs", 0, nil); return err }},
		{"ClaimJobsMySQL nil tx", func() error { _, err := pessimistic.ClaimJobsMySQL(ctx, nil, "jobs", 1, nil); return err }},
		{"ClaimJobsMySQL empty table", func() error { _, err := pessimistic.ClaimJobsMySQL(ctx, myTx, "", 1, nil); return err }},
		{"AdvisoryXactLock nil tx", func() error { return pessimistic.AdvisoryXactLock(ctx, nil, 1) }},
		{"TryAdvisoryXactLock nil tx", func() error { return pessimistic.TryAdvisoryXactLock(ctx, nil, 1) }},
		{"AdvisoryLock nil conn", func() error { _, err := pessimistic.AdvisoryLock(ctx, nil, 1); return err }},
		{"TryAdvisoryLock nil conn", func() error { _, err := pessimistic.TryAdvisoryLock(ctx, nil, 1); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panicked: %v", p)
					}
				}()
				err = tc.call()
			}()
			if !errors.Is(err, pessimistic.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if !strings.HasPrefix(err.Error(), "pessimistic: invalid argument: ") {
				t.Errorf("message %q", err)
			}
		})
	}
	// Nothing above reached the server with bad SQL: both transactions are
	// still healthy.
	if _, err := pgTx.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("pg transaction aborted: %v", err)
	}
	if _, err := myTx.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Errorf("mysql transaction broken: %v", err)
	}
}
