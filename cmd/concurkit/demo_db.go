package main

import (
	"context"
	"database/sql"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"net/url"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// demoPostgres creates the demo schema, applies the example migrations and
// returns a pool with one connection per buyer.
func demoPostgres(ctx context.Context, rawURL, schema string, buyers int) (*pgxpool.Pool, error) {
	quoted, err := ident.Postgres(schema)
	if err != nil {
		return nil, fmt.Errorf("demo: --schema: %w", err)
	}
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("demo: postgres: %w (start the servers with scripts/services.sh up)", err)
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoted)
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("demo: postgres: %w", err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	if err := migrations.UpExamples(ctx, migrations.Postgres, u.String()); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(buyers + 2)
	cfg.MinConns = int32(buyers) // open every buyer's connection before the race
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	conns := make([]*pgxpool.Conn, 0, buyers)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range buyers {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, err
		}
		conns = append(conns, c)
	}
	return pool, nil
}

// demoMySQL does the same for MariaDB/MySQL.
func demoMySQL(ctx context.Context, dsn, schema string, buyers int) (*sql.DB, error) {
	quoted, err := ident.MySQL(schema)
	if err != nil {
		return nil, fmt.Errorf("demo: --schema: %w", err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("demo: mysql DSN: %w", err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	_, err = admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quoted)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("demo: mariadb: %w (start the servers with scripts/services.sh up)", err)
	}
	cfg.DBName = schema
	if err := migrations.UpExamples(ctx, migrations.MySQL, cfg.FormatDSN()); err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(buyers + 2)
	db.SetMaxIdleConns(buyers + 2)
	conns := make([]*sql.Conn, 0, buyers)
	for range buyers {
		c, err := db.Conn(ctx) // open every buyer's connection before the race
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	return db, db.PingContext(ctx)
}

const (
	pgReset     = `INSERT INTO inventory (id, sku, stock, version) VALUES (1, 'last-one', 1, 1) ON CONFLICT (id) DO UPDATE SET stock = 1, version = 1`
	pgStock     = `SELECT stock FROM inventory WHERE id = 1`
	pgReadVer   = `SELECT stock, version FROM inventory WHERE id = 1`
	pgDecrement = `UPDATE inventory SET stock = stock - 1 WHERE id = 1`
	myReset     = `INSERT INTO inventory (id, sku, stock, version) VALUES (1, 'last-one', 1, 1) ON DUPLICATE KEY UPDATE stock = 1, version = 1`
)

func postgresStrategies(pool *pgxpool.Pool) []strategy {
	reset := func(ctx context.Context) error { _, err := pool.Exec(ctx, pgReset); return err }
	stock := func(ctx context.Context) (n int, err error) {
		err = pool.QueryRow(ctx, pgStock).Scan(&n)
		return n, err
	}
	// locked buys inside a transaction after locking the row with lock.
	locked := func(lock pessimistic.Lock, opts pessimistic.Options) func(context.Context, retry.Policy) error {
		return func(ctx context.Context, p retry.Policy) error {
			o := opts // each buyer its own copy: the closure is shared
			o.Retry = p
			return pessimisticpg.InTx(ctx, pool, &o, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := pessimisticpg.LockRows(ctx, tx, "inventory", "id", []int64{1}, lock); err != nil {
					return err
				}
				return buyIn(ctx, tx.QueryRow(ctx, pgStock).Scan, func() error { _, err := tx.Exec(ctx, pgDecrement); return err })
			})
		}
	}
	return []strategy{
		{db: "postgres", name: "optimistic CAS", reset: reset, stock: stock, buy: func(ctx context.Context, p retry.Policy) error {
			return optimistic.Do(ctx, p, func(ctx context.Context) error {
				var n int
				var version int64
				if err := pool.QueryRow(ctx, pgReadVer).Scan(&n, &version); err != nil {
					return err
				}
				if n == 0 {
					return errSoldOut
				}
				_, err := optimisticpg.Update(ctx, pool, demoTable, 1, version, map[string]any{"stock": n - 1})
				return err
			})
		}},
		{db: "postgres", name: "FOR UPDATE", reset: reset, stock: stock, buy: locked(pessimistic.Lock{}, pessimistic.Options{})},
		{db: "postgres", name: "NOWAIT + retry", reset: reset, stock: stock, buy: locked(pessimistic.Lock{Wait: pessimistic.NoWait}, pessimistic.Options{RetryLockNotAvailable: true})},
		{db: "postgres", name: "SERIALIZABLE + retry", reset: reset, stock: stock, buy: func(ctx context.Context, p retry.Policy) error {
			return pessimisticpg.InTx(ctx, pool, &pessimistic.Options{Isolation: sql.LevelSerializable, Retry: p}, func(ctx context.Context, tx pgx.Tx) error {
				return buyIn(ctx, tx.QueryRow(ctx, pgStock).Scan, func() error { _, err := tx.Exec(ctx, pgDecrement); return err })
			})
		}},
	}
}

func mysqlStrategies(db *sql.DB) []strategy {
	reset := func(ctx context.Context) error { _, err := db.ExecContext(ctx, myReset); return err }
	stock := func(ctx context.Context) (n int, err error) {
		err = db.QueryRowContext(ctx, pgStock).Scan(&n)
		return n, err
	}
	locked := func(lock pessimistic.Lock, opts pessimistic.Options) func(context.Context, retry.Policy) error {
		return func(ctx context.Context, p retry.Policy) error {
			o := opts // each buyer its own copy: the closure is shared
			o.Retry = p
			return pessimisticmysql.InTx(ctx, db, &o, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := pessimisticmysql.LockRows(ctx, tx, "inventory", "id", []int64{1}, lock); err != nil {
					return err
				}
				return buyIn(ctx, tx.QueryRowContext(ctx, pgStock).Scan, func() error { _, err := tx.ExecContext(ctx, pgDecrement); return err })
			})
		}
	}
	return []strategy{
		{db: "mariadb", name: "optimistic CAS", reset: reset, stock: stock, buy: func(ctx context.Context, p retry.Policy) error {
			return optimistic.Do(ctx, p, func(ctx context.Context) error {
				var n int
				var version int64
				if err := db.QueryRowContext(ctx, pgReadVer).Scan(&n, &version); err != nil {
					return err
				}
				if n == 0 {
					return errSoldOut
				}
				_, err := optimisticmysql.Update(ctx, db, demoTable, 1, version, map[string]any{"stock": n - 1})
				return err
			})
		}},
		{db: "mariadb", name: "FOR UPDATE", reset: reset, stock: stock, buy: locked(pessimistic.Lock{}, pessimistic.Options{})},
		{db: "mariadb", name: "NOWAIT + retry", reset: reset, stock: stock, buy: locked(pessimistic.Lock{Wait: pessimistic.NoWait}, pessimistic.Options{RetryLockNotAvailable: true})},
	}
}

// buyIn reads the stock with scan and, if a unit is left, decrements it.
func buyIn(_ context.Context, scan func(...any) error, decrement func() error) error {
	var n int
	if err := scan(&n); err != nil {
		return err
	}
	if n <= 0 {
		return errSoldOut
	}
	return decrement()
}
