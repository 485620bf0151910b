package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/inbox/inboxmysql"
	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxmysql"
	"github.com/concurkit/concurkit/outbox/outboxpg"
	"github.com/concurkit/concurkit/testkit"
)

// One suite, run by both adapters, on real servers, each test in a schema
// or database of its own where the toolkit migrations were applied. The
// consumer side of the end-to-end tests is package inbox.

// store is an adapter's *Store as the tests use it.
type store interface {
	outbox.Source
	Reap(ctx context.Context) (int64, error)
	Pending(ctx context.Context) (int64, error)
}

type env struct {
	// store returns a Store on the shared pool.
	store func(t testing.TB, cfg *outbox.Config) store
	// killable returns a Store on a connection of its own and a function
	// that kills that connection on the server (pg_terminate_backend,
	// KILL).
	killable func(t testing.TB) (store, func(t testing.TB))
	// order writes one business transaction: an order row and its event
	// (through a Store with cfg), committed or rolled back. It returns the
	// message's ID.
	order func(ctx context.Context, cfg *outbox.Config, orderID string, msg outbox.Message, commit bool) (string, error)
	// addAutocommit adds msg outside any transaction (on the pool).
	addAutocommit func(ctx context.Context, msg outbox.Message) (string, error)
	// consume handles msg with the inbox (consumer "billing", key msg.ID):
	// its effect increments effects[payload]. It reports whether the
	// inbox processed it (false: duplicate).
	consume func(ctx context.Context, msg outbox.Message) (bool, error)
	// query runs a query returning (text, bigint) rows.
	query func(t testing.TB, q string) [][2]string
	// exec runs a statement (raw SQL, bypassing Add), fatal on error.
	exec func(t testing.TB, q string)
	// business runs one business transaction: an order row orderID, then
	// fn (which adds messages through the Store's Add on the transaction),
	// then a second order row orderID+"-after", then COMMIT. It returns
	// fn's error and the error of the statements after it (the second
	// insert, or COMMIT).
	business func(ctx context.Context, orderID string, fn func(add func(outbox.Message) (string, error)) error) (fnErr, txErr error)
}

func (e env) effects(t testing.TB) map[string]int64 {
	out := map[string]int64{}
	for _, r := range e.query(t, "SELECT id, n FROM effects") {
		n, _ := strconv.ParseInt(r[1], 10, 64)
		out[r[0]] = n
	}
	return out
}

// unpublished counts the outbox rows without published_at (a claimed
// batch included).
func (e env) unpublished(t testing.TB) int {
	return len(e.query(t, "SELECT message_id, id FROM concurkit_outbox WHERE published_at IS NULL"))
}

type backend struct {
	name string
	open func(t testing.TB) env
}

var backends = []backend{
	{"postgres", openPostgres},
	{"mariadb", openMySQL},
}

func each(t *testing.T, f func(t *testing.T, e env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.open(t)) })
	}
}

const (
	pgDDL = `CREATE TABLE orders (id text PRIMARY KEY);
CREATE TABLE effects (id text PRIMARY KEY, n bigint NOT NULL)`
	pgOrder  = `INSERT INTO orders (id) VALUES ($1)`
	pgEffect = `INSERT INTO effects (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = effects.n + 1`

	myDDL = `CREATE TABLE orders (id VARBINARY(255) PRIMARY KEY) ENGINE=InnoDB;
CREATE TABLE effects (id VARBINARY(255) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB`
	myOrder  = `INSERT INTO orders (id) VALUES (?)`
	myEffect = `INSERT INTO effects (id, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1`
)

func openPostgres(t testing.TB) env {
	t.Helper()
	u := testkit.PostgresURL(t)
	if err := migrations.Up(t.Context(), migrations.Postgres, u); err != nil {
		t.Fatal(err)
	}
	pool := testkit.PostgresPoolFor(t, u)
	if _, err := pool.Exec(t.Context(), pgDDL); err != nil {
		t.Fatal(err)
	}
	newStore := func(t testing.TB, db outboxpg.Beginner, cfg *outbox.Config) store {
		s, err := outboxpg.New(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return env{
		store: func(t testing.TB, cfg *outbox.Config) store { return newStore(t, pool, cfg) },
		killable: func(t testing.TB) (store, func(t testing.TB)) {
			// The relay's own pool, recognisable by its application_name.
			app := testkit.Name("relay_")
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			q := pu.Query()
			q.Set("application_name", app)
			pu.RawQuery = q.Encode()
			own := testkit.PostgresPoolFor(t, pu.String())
			kill := func(t testing.TB) {
				t.Helper()
				var n int
				err := pool.QueryRow(context.WithoutCancel(t.Context()),
					`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'`, app).Scan(&n)
				if err != nil || n != 1 {
					t.Fatalf("terminated %d relay sessions in a transaction (%v), want 1", n, err)
				}
			}
			return newStore(t, own, nil), kill
		},
		order: func(ctx context.Context, cfg *outbox.Config, orderID string, msg outbox.Message, commit bool) (id string, err error) {
			s, err := outboxpg.New(pool, cfg)
			if err != nil {
				return "", err
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				return "", err
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			if _, err := tx.Exec(ctx, pgOrder, orderID); err != nil {
				return "", err
			}
			if id, err = s.Add(ctx, tx, msg); err != nil {
				return "", err
			}
			if commit {
				return id, tx.Commit(ctx)
			}
			return id, tx.Rollback(ctx)
		},
		addAutocommit: func(ctx context.Context, msg outbox.Message) (string, error) { return outboxpg.Add(ctx, pool, msg) },
		consume: func(ctx context.Context, msg outbox.Message) (bool, error) {
			return inboxpg.Handle(ctx, pool, "billing", msg.ID, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, pgEffect, string(msg.Payload))
				return err
			})
		},
		query: func(t testing.TB, q string) [][2]string { return pgRows(t, pool, q) },
		exec: func(t testing.TB, q string) {
			t.Helper()
			if _, err := pool.Exec(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		},
		business: func(ctx context.Context, orderID string, fn func(add func(outbox.Message) (string, error)) error) (error, error) {
			s, err := outboxpg.New(pool, nil)
			if err != nil {
				return nil, err
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				return nil, err
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			if _, err := tx.Exec(ctx, pgOrder, orderID); err != nil {
				return nil, err
			}
			fnErr := fn(func(m outbox.Message) (string, error) { return s.Add(ctx, tx, m) })
			if _, err := tx.Exec(ctx, pgOrder, orderID+"-after"); err != nil {
				return fnErr, err
			}
			return fnErr, tx.Commit(ctx)
		},
	}
}

func pgRows(t testing.TB, pool *pgxpool.Pool, q string) [][2]string {
	t.Helper()
	rows, err := pool.Query(context.WithoutCancel(t.Context()), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var a string
		var b int64
		if err := rows.Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{a, strconv.FormatInt(b, 10)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func openMySQL(t testing.TB) env {
	t.Helper()
	dsn := testkit.MySQLDSN(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, dsn); err != nil {
		t.Fatal(err)
	}
	db := testkit.MySQLFor(t, dsn)
	if _, err := db.ExecContext(t.Context(), myDDL); err != nil {
		t.Fatal(err)
	}
	newStore := func(t testing.TB, h outboxmysql.DBTX, cfg *outbox.Config) store {
		s, err := outboxmysql.New(h, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return env{
		store: func(t testing.TB, cfg *outbox.Config) store { return newStore(t, db, cfg) },
		killable: func(t testing.TB) (store, func(t testing.TB)) {
			// One connection, so its thread id is the relay's.
			own := testkit.MySQLFor(t, dsn)
			own.SetMaxOpenConns(1)
			own.SetMaxIdleConns(1)
			var id int64
			if err := own.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			kill := func(t testing.TB) {
				t.Helper()
				var cmd string
				err := db.QueryRowContext(context.WithoutCancel(t.Context()),
					"SELECT command FROM information_schema.processlist WHERE id = ?", id).Scan(&cmd)
				if err != nil || cmd != "Sleep" { // idle in its open transaction
					t.Fatalf("relay connection %d: %q, %v", id, cmd, err)
				}
				if _, err := db.ExecContext(context.WithoutCancel(t.Context()), "KILL "+strconv.FormatInt(id, 10)); err != nil {
					t.Fatalf("KILL %d: %v", id, err)
				}
			}
			return newStore(t, own, nil), kill
		},
		order: func(ctx context.Context, cfg *outbox.Config, orderID string, msg outbox.Message, commit bool) (id string, err error) {
			s, err := outboxmysql.New(db, cfg)
			if err != nil {
				return "", err
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return "", err
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, myOrder, orderID); err != nil {
				return "", err
			}
			if id, err = s.Add(ctx, tx, msg); err != nil {
				return "", err
			}
			if commit {
				return id, tx.Commit()
			}
			return id, tx.Rollback()
		},
		addAutocommit: func(ctx context.Context, msg outbox.Message) (string, error) { return outboxmysql.Add(ctx, db, msg) },
		consume: func(ctx context.Context, msg outbox.Message) (bool, error) {
			return inboxmysql.Handle(ctx, db, "billing", msg.ID, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, myEffect, msg.Payload)
				return err
			})
		},
		query: func(t testing.TB, q string) [][2]string {
			t.Helper()
			rows, err := db.QueryContext(context.WithoutCancel(t.Context()), q)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out [][2]string
			for rows.Next() {
				var a string
				var b int64
				if err := rows.Scan(&a, &b); err != nil {
					t.Fatal(err)
				}
				out = append(out, [2]string{a, strconv.FormatInt(b, 10)})
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
		exec: func(t testing.TB, q string) {
			t.Helper()
			if _, err := db.ExecContext(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		},
		business: func(ctx context.Context, orderID string, fn func(add func(outbox.Message) (string, error)) error) (error, error) {
			s, err := outboxmysql.New(db, nil)
			if err != nil {
				return nil, err
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, myOrder, orderID); err != nil {
				return nil, err
			}
			fnErr := fn(func(m outbox.Message) (string, error) { return s.Add(ctx, tx, m) })
			if _, err := tx.ExecContext(ctx, myOrder, orderID+"-after"); err != nil {
				return fnErr, err
			}
			return fnErr, tx.Commit()
		},
	}
}

// fakeClock is an injected Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// produce writes n orders, each with its event, in business transactions
// of their own; the payload is the order id.
func produce(t testing.TB, e env, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		order := fmt.Sprintf("%s-%04d", prefix, i)
		id, err := e.order(t.Context(), nil, order, outbox.Message{Topic: "orders", Key: order, Payload: []byte(order)}, true)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// waitFor polls cond until it holds or the bound passes.
func waitFor(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", bound, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
