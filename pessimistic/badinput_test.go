package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

var badInputMessage = regexp.MustCompile(`^pessimistic(pg|mysql)?: invalid argument: `)

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
		{"InTx nil db", func() error { return pessimisticpg.InTx(ctx, nil, nil, nop) }},
		{"InTx typed nil pool", func() error { return pessimisticpg.InTx(ctx, nilPool, nil, nop) }},
		{"InTx nil fn", func() error { return pessimisticpg.InTx(ctx, pool, nil, nil) }},
		{"InTx negative LockTimeout", func() error {
			return pessimisticpg.InTx(ctx, pool, &pessimistic.Options{LockTimeout: -time.Second}, nop)
		}},
		{"InTx unsupported isolation", func() error {
			return pessimisticpg.InTx(ctx, pool, &pessimistic.Options{Isolation: sql.LevelSnapshot}, nop)
		}},
		{"InTx negative retry", func() error {
			return pessimisticpg.InTx(ctx, pool, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: -1}}, nop)
		}},
		{"InTxMySQL nil db", func() error { return pessimisticmysql.InTx(ctx, nil, nil, nopSQL) }},
		{"InTxMySQL typed nil db", func() error { return pessimisticmysql.InTx(ctx, nilDB, nil, nopSQL) }},
		{"InTxMySQL nil fn", func() error { return pessimisticmysql.InTx(ctx, db, nil, nil) }},
		{"InTxMySQL negative LockTimeout", func() error {
			return pessimisticmysql.InTx(ctx, db, &pessimistic.Options{LockTimeout: -1}, nopSQL)
		}},
		{"InTxMySQL LockTimeout on a handle without its own connections", func() error {
			// Only BeginTx and the query methods: no connection whose session
			// setting could be restored.
			wrapped := struct {
				pessimisticmysql.DBTX
				pessimisticmysql.Beginner
			}{db, db}
			return pessimisticmysql.InTx(ctx, wrapped, &pessimistic.Options{LockTimeout: time.Second}, nopSQL)
		}},
		{"InTxMySQL negative MaxDelay", func() error {
			return pessimisticmysql.InTx(ctx, db, &pessimistic.Options{Retry: retry.Policy{MaxDelay: -1}}, nopSQL)
		}},
		{"LockRows nil tx", func() error { _, err := pessimisticpg.LockRows(ctx, nil, "inventory", "id", keys, ok); return err }},
		{"LockRows empty table", func() error { _, err := pessimisticpg.LockRows(ctx, pgTx, "", "id", keys, ok); return err }},
		{"LockRows empty column", func() error { _, err := pessimisticpg.LockRows(ctx, pgTx, "inventory", "", keys, ok); return err }},
		{"LockRows NUL in table", func() error { _, err := pessimisticpg.LockRows(ctx, pgTx, "inv\x00", "id", keys, ok); return err }},
		{"LockRows name too long", func() error { _, err := pessimisticpg.LockRows(ctx, pgTx, tooLong, "id", keys, ok); return err }},
		{"LockRows negative timeout", func() error {
			_, err := pessimisticpg.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: -time.Second})
			return err
		}},
		{"LockRows WaitTimeout without timeout", func() error {
			_, err := pessimisticpg.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.WaitTimeout})
			return err
		}},
		{"LockRows timeout with NoWait", func() error {
			_, err := pessimisticpg.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.NoWait, Timeout: time.Second})
			return err
		}},
		{"LockRows unknown strength", func() error {
			_, err := pessimisticpg.LockRows(ctx, pgTx, "inventory", "id", keys, pessimistic.Lock{Strength: 9})
			return err
		}},
		{"LockRowsMySQL typed nil tx", func() error {
			_, err := pessimisticmysql.LockRows(ctx, nilTx, "inventory", "id", keys, ok)
			return err
		}},
		{"LockRowsMySQL trailing space", func() error {
			_, err := pessimisticmysql.LockRows(ctx, myTx, "inventory ", "id", keys, ok)
			return err
		}},
		{"LockRowsMySQL unknown wait", func() error {
			_, err := pessimisticmysql.LockRows(ctx, myTx, "inventory", "id", keys, pessimistic.Lock{Wait: 7})
			return err
		}},
		{"LockRowsMySQL too many keys", func() error {
			_, err := pessimisticmysql.LockRows(ctx, myTx, "inventory", "id", make([]int64, 70000), ok)
			return err
		}},
		{"ClaimJobs n=0", func() error { _, err := pessimisticpg.ClaimJobs(ctx, pgTx, "jobs", 0, nil); return err }},
		{"ClaimJobs n<0", func() error { _, err := pessimisticpg.ClaimJobs(ctx, pgTx, "jobs", -3, nil); return err }},
		{"ClaimJobs nil tx", func() error { _, err := pessimisticpg.ClaimJobs(ctx, nil, "jobs", 1, nil); return err }},
		{"ClaimJobs empty table", func() error { _, err := pessimisticpg.ClaimJobs(ctx, pgTx, "", 1, nil); return err }},
		{"ClaimJobs same states", func() error {
			_, err := pessimisticpg.ClaimJobs(ctx, pgTx, "jobs", 1, &pessimistic.ClaimOptions{Pending: "x", Claimed: "x"})
			return err
		}},
		{"ClaimJobs bad column", func() error {
			_, err := pessimisticpg.ClaimJobs(ctx, pgTx, "jobs", 1, &pessimistic.ClaimOptions{StateColumn: tooLong})
			return err
		}},
		{"ClaimJobsMySQL n=0", func() error { _, err := pessimisticmysql.ClaimJobs(ctx, myTx, "jobs", 0, nil); return err }},
		{"ClaimJobsMySQL nil tx", func() error { _, err := pessimisticmysql.ClaimJobs(ctx, nil, "jobs", 1, nil); return err }},
		{"ClaimJobsMySQL empty table", func() error { _, err := pessimisticmysql.ClaimJobs(ctx, myTx, "", 1, nil); return err }},
		{"InTxValue nil fn", func() error {
			_, err := pessimisticpg.InTxValue[int](ctx, pool, nil, nil)
			return err
		}},
		{"InTx Isolation in the caller's pgx.Tx", func() error {
			return pessimisticpg.InTx(ctx, pgTx, &pessimistic.Options{Isolation: sql.LevelSerializable}, nop)
		}},
		{"InTx Isolation on a Beginner without BeginTx", func() error {
			onlyBegin := struct{ pessimisticpg.Beginner }{pool}
			return pessimisticpg.InTx(ctx, onlyBegin, &pessimistic.Options{Isolation: sql.LevelSerializable}, nop)
		}},
		{"InTxMySQL typed nil tx", func() error { return pessimisticmysql.InTx(ctx, nilTx, nil, nopSQL) }},
		{"InTxValueMySQL nil fn", func() error {
			_, err := pessimisticmysql.InTxValue[int](ctx, db, nil, nil)
			return err
		}},
		{"InTxMySQL Isolation in the caller's *sql.Tx", func() error {
			return pessimisticmysql.InTx(ctx, myTx, &pessimistic.Options{Isolation: sql.LevelReadCommitted}, nopSQL)
		}},
		{"InTxMySQL LockTimeout in the caller's *sql.Tx", func() error {
			return pessimisticmysql.InTx(ctx, myTx, &pessimistic.Options{LockTimeout: time.Second}, nopSQL)
		}},
		{"InTxMySQL neither Beginner nor *sql.Tx", func() error {
			return pessimisticmysql.InTx(ctx, struct{ pessimisticmysql.DBTX }{db}, nil, nopSQL)
		}},
		{"LockRows WaitTimeout on a pool", func() error {
			_, err := pessimisticpg.LockRows(ctx, pool, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: time.Second})
			return err
		}},
		{"LockRows WaitTimeout on a connection", func() error {
			_, err := pessimisticpg.LockRows(ctx, conn, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: time.Second})
			return err
		}},
		{"LockRowsMySQL WaitTimeout on a *sql.DB", func() error {
			_, err := pessimisticmysql.LockRows(ctx, db, "inventory", "id", keys, pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: time.Second})
			return err
		}},
		{"ClaimJobsMySQL on a *sql.DB", func() error { _, err := pessimisticmysql.ClaimJobs(ctx, db, "jobs", 1, nil); return err }},
		{"AdvisoryXactLock nil tx", func() error { return pessimisticpg.AdvisoryXactLock(ctx, nil, 1) }},
		{"TryAdvisoryXactLock nil tx", func() error { return pessimisticpg.TryAdvisoryXactLock(ctx, nil, 1) }},
		{"AdvisoryLock nil conn", func() error { _, err := pessimisticpg.AdvisoryLock(ctx, nil, 1); return err }},
		{"TryAdvisoryLock nil conn", func() error { _, err := pessimisticpg.TryAdvisoryLock(ctx, nil, 1); return err }},
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
			if !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			// The core's checks (Lock) say "pessimistic", the adapters'
			// their own name.
			if !badInputMessage.MatchString(err.Error()) {
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
