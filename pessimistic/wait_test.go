package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// waitCase: while another transaction holds FOR UPDATE on row 1 (of rows
// 1, 2, 3), lock keys with lock (and opts) and expect want or wantErr.
type waitCase struct {
	name    string
	lock    pessimistic.Lock
	opts    pessimistic.Options
	keys    []int64
	want    []int64
	wantErr error
}

var once = retry.Policy{MaxAttempts: 1}

func waitCases() []waitCase {
	sec := time.Second
	return []waitCase{
		{name: "NoWait", lock: pessimistic.Lock{Wait: pessimistic.NoWait}, keys: []int64{1}, wantErr: pessimistic.ErrLockNotAvailable},
		{name: "ShareNoWait", lock: pessimistic.Lock{Strength: pessimistic.ForShare, Wait: pessimistic.NoWait}, keys: []int64{1, 2}, wantErr: pessimistic.ErrLockNotAvailable},
		{name: "NoKeyUpdateNoWait", lock: pessimistic.Lock{Strength: pessimistic.ForNoKeyUpdate, Wait: pessimistic.NoWait}, keys: []int64{1}, wantErr: pessimistic.ErrLockNotAvailable},
		{name: "WaitTimeout1s", lock: pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: sec}, keys: []int64{1}, wantErr: pessimistic.ErrLockTimeout},
		{name: "OptionsLockTimeout1s", opts: pessimistic.Options{LockTimeout: sec}, keys: []int64{1}, wantErr: pessimistic.ErrLockTimeout},
		{name: "SkipLocked", lock: pessimistic.Lock{Wait: pessimistic.SkipLocked}, keys: []int64{3, 1, 2}, want: []int64{2, 3}},
		{name: "ShareSkipLocked", lock: pessimistic.Lock{Strength: pessimistic.ForShare, Wait: pessimistic.SkipLocked}, keys: []int64{1, 2}, want: []int64{2}},
		{name: "NoWaitFreeRowsMissingKey", lock: pessimistic.Lock{Wait: pessimistic.NoWait}, keys: []int64{2, 3, 4, 2}, want: []int64{2, 3}},
		{name: "WaitTimeoutFreeRow", lock: pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: sec}, keys: []int64{2}, want: []int64{2}},
		{name: "Empty", keys: nil, want: nil},
	}
}

func checkWait(t *testing.T, tc waitCase, got []int64, err error, isDriverErr func(error) bool) {
	t.Helper()
	if tc.wantErr != nil {
		if !errors.Is(err, tc.wantErr) || !isDriverErr(err) {
			t.Fatalf("err = %v, want %v wrapping the driver's lock error", err, tc.wantErr)
		}
		for _, other := range []error{pessimistic.ErrLockNotAvailable, pessimistic.ErrLockTimeout} {
			if other != tc.wantErr && errors.Is(err, other) {
				t.Errorf("err = %v also matches %v", err, other)
			}
		}
		return
	}
	if err != nil || !slices.Equal(got, tc.want) {
		t.Fatalf("got %v, %v; want %v, nil", got, err, tc.want)
	}
}

func TestLockModesPostgres(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	if got, err := pessimisticpg.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil || !slices.Equal(got, []int64{1}) {
		t.Fatalf("holder: %v, %v", got, err)
	}
	for _, tc := range waitCases() {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Retry = once
			var got []int64
			var before, after string
			err := pessimisticpg.InTx(ctx, pool, &opts, func(ctx context.Context, tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&before); err != nil {
					return err
				}
				var err error
				if got, err = pessimisticpg.LockRows(ctx, tx, "inventory", "id", tc.keys, tc.lock); err != nil {
					return err
				}
				return tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&after)
			})
			checkWait(t, tc, got, err, func(err error) bool {
				var pgErr *pgconn.PgError
				return errors.As(err, &pgErr) && pgErr.Code == "55P03"
			})
			if err == nil && before != after {
				t.Errorf("lock_timeout %q after LockRows, was %q", after, before)
			}
		})
	}
}

func TestLockModesMariaDB(t *testing.T) {
	t.Parallel() // MariaDB only: runs alongside the other MariaDB tests, after the PostgreSQL ones
	db := myDB(t, 4)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if got, err := pessimisticmysql.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil || !slices.Equal(got, []int64{1}) {
		t.Fatalf("holder: %v, %v", got, err)
	}
	for _, tc := range waitCases() {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Retry = once
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var before, inside, after int64
			if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&before); err != nil {
				t.Fatal(err)
			}
			var got []int64
			err = pessimisticmysql.InTx(ctx, conn, &opts, func(ctx context.Context, tx *sql.Tx) error {
				if err := tx.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&inside); err != nil {
					return err
				}
				var err error
				got, err = pessimisticmysql.LockRows(ctx, tx, "inventory", "id", tc.keys, tc.lock)
				return err
			})
			checkWait(t, tc, got, err, func(err error) bool {
				var myErr *mysql.MySQLError
				return errors.As(err, &myErr) && myErr.Number == 1205
			})
			if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Errorf("innodb_lock_wait_timeout %d after the transaction, was %d", after, before)
			}
			if tc.opts.LockTimeout > 0 && inside != 1 {
				t.Errorf("innodb_lock_wait_timeout inside = %d, want 1", inside)
			}
		})
	}
}

// TestStrengthsPostgres: FOR NO KEY UPDATE coexists with FOR KEY SHARE (a
// foreign-key check) where FOR UPDATE does not; two FOR SHARE coexist.
func TestStrengthsPostgres(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1), (2, 'b', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	if _, err := holder.Exec(ctx, "SELECT id FROM inventory WHERE id = 1 FOR KEY SHARE"); err != nil {
		t.Fatal(err)
	}
	if _, err := pessimisticpg.LockRows(ctx, holder, "inventory", "id", []int64{2}, pessimistic.Lock{Strength: pessimistic.ForShare}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		lock    pessimistic.Lock
		key     int64
		wantErr error
	}{
		{"NoKeyUpdate vs KeyShare", pessimistic.Lock{Strength: pessimistic.ForNoKeyUpdate, Wait: pessimistic.NoWait}, 1, nil},
		{"Update vs KeyShare", pessimistic.Lock{Wait: pessimistic.NoWait}, 1, pessimistic.ErrLockNotAvailable},
		{"Share vs Share", pessimistic.Lock{Strength: pessimistic.ForShare, Wait: pessimistic.NoWait}, 2, nil},
		{"NoKeyUpdate vs Share", pessimistic.Lock{Strength: pessimistic.ForNoKeyUpdate, Wait: pessimistic.NoWait}, 2, pessimistic.ErrLockNotAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pessimisticpg.InTx(ctx, pool, &pessimistic.Options{Retry: once}, func(ctx context.Context, tx pgx.Tx) error {
				_, err := pessimisticpg.LockRows(ctx, tx, "inventory", "id", []int64{tc.key}, tc.lock)
				return err
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestShareMariaDB: two LOCK IN SHARE MODE coexist; FOR UPDATE against a
// shared lock fails under NOWAIT.
func TestShareMariaDB(t *testing.T) {
	db := myDB(t, 4)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	share := pessimistic.Lock{Strength: pessimistic.ForShare, Wait: pessimistic.NoWait}
	if _, err := pessimisticmysql.LockRows(ctx, holder, "inventory", "id", []int64{1}, share); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		lock    pessimistic.Lock
		wantErr error
	}{
		{"Share vs Share", share, nil},
		{"Update vs Share", pessimistic.Lock{Wait: pessimistic.NoWait}, pessimistic.ErrLockNotAvailable},
		{"NoKeyUpdate (= Update) vs Share", pessimistic.Lock{Strength: pessimistic.ForNoKeyUpdate, Wait: pessimistic.NoWait}, pessimistic.ErrLockNotAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pessimisticmysql.InTx(ctx, db, &pessimistic.Options{Retry: once}, func(ctx context.Context, tx *sql.Tx) error {
				_, err := pessimisticmysql.LockRows(ctx, tx, "inventory", "id", []int64{1}, tc.lock)
				return err
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
