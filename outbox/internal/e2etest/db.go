package e2etest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/inbox/inboxmysql"
	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxmysql"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// The databases of a run.
const (
	Postgres = "postgres"
	MariaDB  = "mariadb"
)

// consumer is the inbox's consumer name.
const consumer = "e2e"

// db is one run's database: the business tables, the outbox, the inbox
// and the run's counters, on PostgreSQL (pgx) or MariaDB (database/sql).
type db struct {
	kind  string
	pg    *pgxpool.Pool
	my    *sql.DB
	store outbox.Source
	pend  func(ctx context.Context) (int64, error)
}

func openDB(ctx context.Context, kind, dsn string) (*db, error) {
	d := &db{kind: kind}
	switch kind {
	case Postgres:
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = 20
		if d.pg, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			return nil, err
		}
		s, err := outboxpg.New(d.pg, nil)
		if err != nil {
			return nil, err
		}
		d.store, d.pend = s, s.Pending
	case MariaDB:
		var err error
		if d.my, err = sql.Open("mysql", dsn); err != nil {
			return nil, err
		}
		d.my.SetMaxOpenConns(20)
		s, err := outboxmysql.New(d.my, nil)
		if err != nil {
			return nil, err
		}
		d.store, d.pend = s, s.Pending
	default:
		return nil, fmt.Errorf("e2e: unknown database %q", kind)
	}
	return d, nil
}

func (d *db) close() {
	if d.pg != nil {
		d.pg.Close()
	}
	if d.my != nil {
		_ = d.my.Close()
	}
}

// setup creates the toolkit's tables and the run's: orders (the business
// rows), effects (one row per applied event, no key: a second
// application is a second row) and counts.
func setup(ctx context.Context, kind, dsn string) error {
	dialect := migrations.Postgres
	if kind == MariaDB {
		dialect = migrations.MySQL
	}
	if err := migrations.Up(ctx, dialect, dsn); err != nil {
		return err
	}
	d, err := openDB(ctx, kind, dsn)
	if err != nil {
		return err
	}
	defer d.close()
	for _, q := range []string{
		`CREATE TABLE e2e_orders (event varchar(64) PRIMARY KEY)`,
		`CREATE TABLE e2e_effects (event varchar(64) NOT NULL)`,
		`CREATE TABLE e2e_counts (kind varchar(64) PRIMARY KEY, n bigint NOT NULL)`,
	} {
		if err := d.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// bind turns $1 into ? for MariaDB.
func (d *db) bind(q string) string {
	if d.pg != nil {
		return q
	}
	return strings.ReplaceAll(q, "$1", "?")
}

func (d *db) exec(ctx context.Context, q string, args ...any) error {
	if d.pg != nil {
		_, err := d.pg.Exec(ctx, q, args...)
		return err
	}
	_, err := d.my.ExecContext(ctx, q, args...)
	return err
}

// produce is one business transaction: an order row and its event.
func (d *db) produce(ctx context.Context, topic, event string) error {
	msg := outbox.Message{Topic: topic, Key: event, Payload: []byte(event)}
	if d.pg != nil {
		return pessimisticpg.InTx(ctx, d.pg, nil, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO e2e_orders (event) VALUES ($1)`, event); err != nil {
				return err
			}
			_, err := outboxpg.Add(ctx, tx, msg)
			return err
		})
	}
	return pessimisticmysql.InTx(ctx, d.my, nil, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO e2e_orders (event) VALUES (?)`, event); err != nil {
			return err
		}
		_, err := outboxmysql.Add(ctx, tx, msg)
		return err
	})
}

// apply applies an event's effect through the inbox; processed is false
// for a duplicate the inbox absorbed.
func (d *db) apply(ctx context.Context, id, event string) (processed bool, err error) {
	if os.Getenv(EnvBreak) == "inbox" { // the check must fail: see EnvBreak
		return true, d.exec(ctx, d.bind(`INSERT INTO e2e_effects (event) VALUES ($1)`), event)
	}
	if d.pg != nil {
		return inboxpg.Handle(ctx, d.pg, consumer, id, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO e2e_effects (event) VALUES ($1)`, event)
			return err
		})
	}
	return inboxmysql.Handle(ctx, d.my, consumer, id, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO e2e_effects (event) VALUES (?)`, event)
		return err
	})
}

// count adds n to the counter kind (for children, whose own counters die
// with them).
func (d *db) count(ctx context.Context, kind string, n int64) error {
	if n == 0 {
		return nil
	}
	if d.pg != nil {
		return d.exec(ctx, `INSERT INTO e2e_counts (kind, n) VALUES ($1, $2) ON CONFLICT (kind) DO UPDATE SET n = e2e_counts.n + EXCLUDED.n`, kind, n)
	}
	return d.exec(ctx, `INSERT INTO e2e_counts (kind, n) VALUES (?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)`, kind, n)
}

func (d *db) counts(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := d.rows(ctx, `SELECT kind, n FROM e2e_counts`, func(scan func(...any) error) error {
		var k string
		var n int64
		if err := scan(&k, &n); err != nil {
			return err
		}
		out[k] = n
		return nil
	})
	return out, err
}

// effects returns the number of effect rows, of distinct events with an
// effect, and the events applied more than once.
func (d *db) effects(ctx context.Context) (rows, distinct int64, twice []string, err error) {
	err = d.rows(ctx, `SELECT count(*), count(DISTINCT event) FROM e2e_effects`, func(scan func(...any) error) error {
		return scan(&rows, &distinct)
	})
	if err != nil {
		return
	}
	err = d.rows(ctx, `SELECT event FROM e2e_effects GROUP BY event HAVING count(*) > 1 ORDER BY event LIMIT 20`, func(scan func(...any) error) error {
		var e string
		err := scan(&e)
		twice = append(twice, e)
		return err
	})
	return
}

// missing returns up to 20 produced events without an effect.
func (d *db) missing(ctx context.Context) ([]string, error) {
	var out []string
	err := d.rows(ctx, `SELECT o.event FROM e2e_orders o WHERE NOT EXISTS (SELECT 1 FROM e2e_effects e WHERE e.event = o.event) ORDER BY o.event LIMIT 20`,
		func(scan func(...any) error) error {
			var e string
			err := scan(&e)
			out = append(out, e)
			return err
		})
	return out, err
}

func (d *db) produced(ctx context.Context) (n int64, err error) {
	err = d.rows(ctx, `SELECT count(*) FROM e2e_orders`, func(scan func(...any) error) error { return scan(&n) })
	return
}

func (d *db) rows(ctx context.Context, q string, each func(scan func(...any) error) error) error {
	if d.pg != nil {
		rows, err := d.pg.Query(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := each(rows.Scan); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	rows, err := d.my.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// applied returns how many of events have an effect.
func (d *db) applied(ctx context.Context, events []string) (int, error) {
	var n int64
	var err error
	if d.pg != nil {
		err = d.pg.QueryRow(ctx, `SELECT count(DISTINCT event) FROM e2e_effects WHERE event = ANY($1)`, events).Scan(&n)
	} else {
		q := `SELECT count(DISTINCT event) FROM e2e_effects WHERE event IN (?` + strings.Repeat(",?", len(events)-1) + `)`
		args := make([]any, len(events))
		for i, e := range events {
			args[i] = e
		}
		err = d.my.QueryRowContext(ctx, q, args...).Scan(&n)
	}
	return int(n), err
}
