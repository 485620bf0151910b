package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// strategy is one way to make a read-modify-write safe, for both drivers.
type strategy struct {
	name string
	opts pessimistic.Options
	// read returns the current value of the column (stock or value) of row
	// id, locking it the strategy's way.
	pgRead func(ctx context.Context, tx pgx.Tx, q string, id int64) (int64, error)
	myRead func(ctx context.Context, tx *sql.Tx, q string, id int64) (int64, error)
}

// testRetry retries long enough for 64 contenders on one row.
var testRetry = retry.Policy{MaxAttempts: 10000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}

func lockedRead(l pessimistic.Lock) (func(context.Context, pgx.Tx, string, int64) (int64, error), func(context.Context, *sql.Tx, string, int64) (int64, error)) {
	pg := func(ctx context.Context, tx pgx.Tx, q string, id int64) (int64, error) {
		clause, err := pessimisticpg.Clause(l)
		if err != nil {
			return 0, err
		}
		var v int64
		err = tx.QueryRow(ctx, q+clause, id).Scan(&v)
		return v, pessimisticpg.MapError(ctx, l, err)
	}
	my := func(ctx context.Context, tx *sql.Tx, q string, id int64) (int64, error) {
		clause, err := pessimisticmysql.Clause(l)
		if err != nil {
			return 0, err
		}
		var v int64
		err = tx.QueryRowContext(ctx, q+clause, id).Scan(&v)
		return v, pessimisticmysql.MapError(ctx, l, err)
	}
	return pg, my
}

func strategies(mysql bool) []strategy {
	fuPG, fuMy := lockedRead(pessimistic.Lock{})
	nwPG, nwMy := lockedRead(pessimistic.Lock{Wait: pessimistic.NoWait})
	plainPG := func(ctx context.Context, tx pgx.Tx, q string, id int64) (int64, error) {
		var v int64
		err := tx.QueryRow(ctx, q, id).Scan(&v)
		return v, err
	}
	plainMy := func(ctx context.Context, tx *sql.Tx, q string, id int64) (int64, error) {
		var v int64
		err := tx.QueryRowContext(ctx, q, id).Scan(&v)
		return v, err
	}
	s := []strategy{
		{name: "ForUpdate", opts: pessimistic.Options{Retry: testRetry}, pgRead: fuPG, myRead: fuMy},
		{name: "NoWaitRetry", opts: pessimistic.Options{Retry: testRetry, RetryLockNotAvailable: true}, pgRead: nwPG, myRead: nwMy},
		// PostgreSQL SSI; on MariaDB SERIALIZABLE turns the plain read into a
		// shared lock, and the upgrades deadlock (1213) and are retried.
		{name: "SerializableRetry", opts: pessimistic.Options{Retry: testRetry, Isolation: sql.LevelSerializable}, pgRead: plainPG, myRead: plainMy},
	}
	return s
}

type outcome struct {
	ok, soldOut, other atomic.Int64
	retries            atomic.Int64
	firstOther         atomic.Value
}

func (o *outcome) record(err error) {
	switch {
	case err == nil:
		o.ok.Add(1)
	case errors.Is(err, errSoldOut):
		o.soldOut.Add(1)
	default:
		o.other.Add(1)
		o.firstOther.CompareAndSwap(nil, err.Error())
	}
}

// withCounting returns ctx with observe hooks that count the retries of
// InTx (retry.Do's events, not the final give-up) into o.
func withCounting(ctx context.Context, o *outcome) context.Context {
	return observe.WithHooks(ctx, &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			o.retries.Add(1)
		}
	}})
}

const buyers = 64

// gate starts n goroutines together: each first takes its connection, then
// waits at the gate.
type gate struct {
	ready sync.WaitGroup
	open  chan struct{}
}

func newGate(n int) *gate {
	g := &gate{open: make(chan struct{})}
	g.ready.Add(n)
	return g
}
func (g *gate) wait()  { g.ready.Done(); <-g.open }
func (g *gate) start() { g.ready.Wait(); close(g.open) }

func TestOversellPostgres(t *testing.T) {
	pool := pgPool(t, buyers+2)
	for _, s := range strategies(false) {
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := pool.Exec(ctx, "DELETE FROM inventory; INSERT INTO inventory (id, sku, stock) VALUES (1, 'last-one', 1)"); err != nil {
				t.Fatal(err)
			}
			var o outcome
			opts, ctx := &s.opts, withCounting(ctx, &o)
			g := newGate(buyers)
			var wg sync.WaitGroup
			for range buyers {
				wg.Go(func() {
					conn, err := pool.Acquire(ctx)
					if err != nil {
						g.wait()
						o.record(err)
						return
					}
					defer conn.Release()
					g.wait()
					o.record(pessimisticpg.InTx(ctx, conn, opts, func(ctx context.Context, tx pgx.Tx) error {
						stock, err := s.pgRead(ctx, tx, "SELECT stock FROM inventory WHERE id = $1", 1)
						if err != nil {
							return err
						}
						if stock < 1 {
							return errSoldOut
						}
						_, err = tx.Exec(ctx, "UPDATE inventory SET stock = stock - 1 WHERE id = $1", 1)
						return err
					}))
				})
			}
			g.start()
			wg.Wait()
			var stock int64
			if err := pool.QueryRow(ctx, "SELECT stock FROM inventory WHERE id = 1").Scan(&stock); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: ok=%d soldOut=%d other=%d retries=%d stock=%d", s.name, o.ok.Load(), o.soldOut.Load(), o.other.Load(), o.retries.Load(), stock)
			if o.ok.Load() != 1 || o.soldOut.Load() != buyers-1 || o.other.Load() != 0 || stock != 0 {
				t.Errorf("want ok=1 soldOut=%d other=0 stock=0; first other error: %v", buyers-1, o.firstOther.Load())
			}
		})
	}
}

func TestOversellMariaDB(t *testing.T) {
	t.Parallel() // MariaDB only: runs alongside the other MariaDB tests, after the PostgreSQL ones
	db := myDB(t, buyers+2)
	for _, s := range strategies(true) {
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := db.ExecContext(ctx, "DELETE FROM inventory; INSERT INTO inventory (id, sku, stock) VALUES (1, 'last-one', 1)"); err != nil {
				t.Fatal(err)
			}
			var o outcome
			opts, ctx := &s.opts, withCounting(ctx, &o)
			g := newGate(buyers)
			var wg sync.WaitGroup
			for range buyers {
				wg.Go(func() {
					conn, err := db.Conn(ctx)
					if err != nil {
						g.wait()
						o.record(err)
						return
					}
					defer conn.Close()
					g.wait()
					o.record(pessimisticmysql.InTx(ctx, conn, opts, func(ctx context.Context, tx *sql.Tx) error {
						stock, err := s.myRead(ctx, tx, "SELECT stock FROM inventory WHERE id = ?", 1)
						if err != nil {
							return err
						}
						if stock < 1 {
							return errSoldOut
						}
						_, err = tx.ExecContext(ctx, "UPDATE inventory SET stock = stock - 1 WHERE id = ?", 1)
						return err
					}))
				})
			}
			g.start()
			wg.Wait()
			var stock int64
			if err := db.QueryRowContext(ctx, "SELECT stock FROM inventory WHERE id = 1").Scan(&stock); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: ok=%d soldOut=%d other=%d retries=%d stock=%d", s.name, o.ok.Load(), o.soldOut.Load(), o.other.Load(), o.retries.Load(), stock)
			if o.ok.Load() != 1 || o.soldOut.Load() != buyers-1 || o.other.Load() != 0 || stock != 0 {
				t.Errorf("want ok=1 soldOut=%d other=0 stock=0; first other error: %v", buyers-1, o.firstOther.Load())
			}
		})
	}
}

const (
	workers    = 32
	increments = 50
)

func TestLostUpdatePostgres(t *testing.T) {
	pool := pgPool(t, workers+2)
	for _, s := range strategies(false) {
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := pool.Exec(ctx, "DELETE FROM counters; INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
				t.Fatal(err)
			}
			var o outcome
			opts, ctx := &s.opts, withCounting(ctx, &o)
			g := newGate(workers)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					conn, err := pool.Acquire(ctx)
					if err != nil {
						g.wait()
						o.record(err)
						return
					}
					defer conn.Release()
					g.wait()
					for range increments {
						o.record(pessimisticpg.InTx(ctx, conn, opts, func(ctx context.Context, tx pgx.Tx) error {
							v, err := s.pgRead(ctx, tx, "SELECT value FROM counters WHERE id = $1", 1)
							if err != nil {
								return err
							}
							_, err = tx.Exec(ctx, "UPDATE counters SET value = $1 WHERE id = $2", v+1, 1)
							return err
						}))
					}
				})
			}
			g.start()
			wg.Wait()
			var v int64
			if err := pool.QueryRow(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: ok=%d other=%d retries=%d value=%d", s.name, o.ok.Load(), o.other.Load(), o.retries.Load(), v)
			if v != workers*increments || o.ok.Load() != workers*increments {
				t.Errorf("value = %d, ok = %d, want %d; first error: %v", v, o.ok.Load(), workers*increments, o.firstOther.Load())
			}
		})
	}
}

func TestLostUpdateMariaDB(t *testing.T) {
	t.Parallel() // MariaDB only: runs alongside the other MariaDB tests, after the PostgreSQL ones
	db := myDB(t, workers+2)
	// SERIALIZABLE on MariaDB is InnoDB shared locks upgraded to exclusive:
	// correct (it deadlocks and retries, see TestOversellMariaDB) but slow
	// with 32 writers on one row, so it is left out here.
	for _, s := range strategies(true)[:2] {
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := db.ExecContext(ctx, "DELETE FROM counters; INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
				t.Fatal(err)
			}
			var o outcome
			opts, ctx := &s.opts, withCounting(ctx, &o)
			g := newGate(workers)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					conn, err := db.Conn(ctx)
					if err != nil {
						g.wait()
						o.record(err)
						return
					}
					defer conn.Close()
					g.wait()
					for range increments {
						o.record(pessimisticmysql.InTx(ctx, conn, opts, func(ctx context.Context, tx *sql.Tx) error {
							v, err := s.myRead(ctx, tx, "SELECT value FROM counters WHERE id = ?", 1)
							if err != nil {
								return err
							}
							_, err = tx.ExecContext(ctx, "UPDATE counters SET value = ? WHERE id = ?", v+1, 1)
							return err
						}))
					}
				})
			}
			g.start()
			wg.Wait()
			var v int64
			if err := db.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: ok=%d other=%d retries=%d value=%d", s.name, o.ok.Load(), o.other.Load(), o.retries.Load(), v)
			if v != workers*increments || o.ok.Load() != workers*increments {
				t.Errorf("value = %d, ok = %d, want %d; first error: %v", v, o.ok.Load(), workers*increments, o.firstOther.Load())
			}
		})
	}
}

// TestLostUpdateNegativeControl runs the same increments with a plain read
// (no lock, default isolation, no retry): updates are lost, which proves
// the lost-update tests above can fail.
func TestLostUpdateNegativeControl(t *testing.T) {
	t.Run("Postgres", func(t *testing.T) {
		pool := pgPool(t, workers+2)
		ctx := t.Context()
		if _, err := pool.Exec(ctx, "INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
			t.Fatal(err)
		}
		g := newGate(workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				g.wait()
				for range increments {
					_ = pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
						var v int64
						if err := tx.QueryRow(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&v); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, "UPDATE counters SET value = $1 WHERE id = 1", v+1)
						return err
					})
				}
			})
		}
		g.start()
		wg.Wait()
		var v int64
		if err := pool.QueryRow(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		t.Logf("READ COMMITTED without a lock: value = %d of %d", v, workers*increments)
		if v >= workers*increments {
			t.Errorf("no update lost (value %d): the control did not exercise a race", v)
		}
	})
	t.Run("MariaDB", func(t *testing.T) {
		db := myDB(t, workers+2)
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, "INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
			t.Fatal(err)
		}
		g := newGate(workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				g.wait()
				for range increments {
					_ = pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
						var v int64
						if err := tx.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&v); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, "UPDATE counters SET value = ? WHERE id = 1", v+1)
						return err
					})
				}
			})
		}
		g.start()
		wg.Wait()
		var v int64
		if err := db.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		t.Logf("REPEATABLE READ without a lock: value = %d of %d", v, workers*increments)
		if v >= workers*increments {
			t.Errorf("no update lost (value %d): the control did not exercise a race", v)
		}
	})
}
