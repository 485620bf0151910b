package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxmysql"
	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/internal/galeratest"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// One suite, run by every adapter: each backend gives the tests consumers
// whose handler applies a known effect (a per-message counter, a
// per-producer log) in the inbox's transaction, on the real server, in a
// schema or database of its own where the toolkit migrations were applied.

// consumer is an inbox bound to a connection (or pool), with the test's
// effects: handle increments effects[id] and then calls hook (nil = none);
// handleSeq appends seq to the producer's log and then calls hook.
type consumer struct {
	handle    func(ctx context.Context, consumer, id string, hook func() error) (bool, error)
	handleSeq func(ctx context.Context, consumer, producer string, seq int64, hook func() error) (inbox.SeqResult, error)
	reap      func(ctx context.Context) (int64, error)
}

// env is one backend, ready for a test.
type env struct {
	// open returns a consumer on the shared pool.
	open func(t testing.TB, cfg *inbox.Config) consumer
	// session returns a consumer on a connection of its own, and the
	// server's id of that session.
	session func(t testing.TB, cfg *inbox.Config) (consumer, int64)
	// waiting counts the sessions among ids that wait for a row lock (on
	// MariaDB: that are executing an INSERT into the inbox, which cannot
	// finish while another transaction holds the key).
	waiting func(t testing.TB, ids []int64) int
	// inCallerTx runs Handle inside a transaction the test opened, then
	// commits or rolls it back.
	inCallerTx func(t testing.TB, id string, commit bool) (bool, error)
	// callerTx runs run with a consumer on a transaction the test opened,
	// then commits it (fatal if that fails) or rolls it back.
	callerTx func(t testing.TB, commit bool, run func(c consumer))
	// query runs a query returning (text, bigint) rows.
	query func(t testing.TB, q string) [][2]string
	// dialect's placeholders are not needed: queries are literal.

	// galera is the cluster of the Galera backend, nil for the others.
	galera *galeratest.Cluster
}

// effects returns id -> applied count.
func (e env) effects(t testing.TB) map[string]int64 {
	out := map[string]int64{}
	for _, r := range e.query(t, "SELECT id, n FROM effects") {
		n, _ := strconv.ParseInt(r[1], 10, 64)
		out[r[0]] = n
	}
	return out
}

// seqLog returns the sequences applied for producer, in the order applied.
func (e env) seqLog(t testing.TB, producer string) []int64 {
	var out []int64
	for _, r := range e.query(t, "SELECT producer, seq FROM seqlog ORDER BY pos") {
		if r[0] == producer {
			n, _ := strconv.ParseInt(r[1], 10, 64)
			out = append(out, n)
		}
	}
	return out
}

// count returns the number of rows of a query's result.
func (e env) count(t testing.TB, table string) int {
	return len(e.query(t, "SELECT 'x', 0 FROM "+table))
}

type backend struct {
	name string
	open func(t testing.TB) env
}

var backends = []backend{
	{"postgres", openPostgres},
	{"mariadb", func(t testing.TB) env { return openMySQL(t, false) }},
	{"mariadb-clientFoundRows", func(t testing.TB) env { return openMySQL(t, true) }},
	{"galera", openGalera},
}

// each runs f once per backend, as a subtest.
func each(t *testing.T, f func(t *testing.T, e env)) { eachExcept(t, "", f) }

// eachExcept is each without the backend named except: a test whose
// premise that backend does not have (it runs elsewhere in its own form).
func eachExcept(t *testing.T, except string, f func(t *testing.T, e env)) {
	for _, b := range backends {
		if b.name == except {
			continue
		}
		t.Run(b.name, func(t *testing.T) { f(t, b.open(t)) })
	}
}

const (
	pgDDL = `CREATE TABLE effects (id text PRIMARY KEY, n bigint NOT NULL);
CREATE TABLE seqlog (pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, producer text NOT NULL, seq bigint NOT NULL)`
	pgEffect = `INSERT INTO effects (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = effects.n + 1`
	pgLog    = `INSERT INTO seqlog (producer, seq) VALUES ($1, $2)`

	myDDL = `CREATE TABLE effects (id VARBINARY(255) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB;
CREATE TABLE seqlog (pos BIGINT AUTO_INCREMENT PRIMARY KEY, producer VARBINARY(255) NOT NULL, seq BIGINT NOT NULL) ENGINE=InnoDB`
	myEffect = `INSERT INTO effects (id, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1`
	myLog    = `INSERT INTO seqlog (producer, seq) VALUES (?, ?)`
)

func call(hook func() error) error {
	if hook == nil {
		return nil
	}
	return hook()
}

func openPostgres(t testing.TB) env {
	t.Helper()
	url := testkit.PostgresURL(t)
	if err := migrations.Up(t.Context(), migrations.Postgres, url); err != nil {
		t.Fatal(err)
	}
	pool := testkit.PostgresPoolFor(t, url)
	if _, err := pool.Exec(t.Context(), pgDDL); err != nil {
		t.Fatal(err)
	}
	mk := func(t testing.TB, db inboxpg.Beginner, cfg *inbox.Config) consumer {
		ib, err := inboxpg.New(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return consumer{
			handle: func(ctx context.Context, c, id string, hook func() error) (bool, error) {
				return ib.Handle(ctx, c, id, func(ctx context.Context, tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, pgEffect, id); err != nil {
						return err
					}
					return call(hook)
				})
			},
			handleSeq: func(ctx context.Context, c, p string, seq int64, hook func() error) (inbox.SeqResult, error) {
				return ib.HandleSequence(ctx, c, p, seq, func(ctx context.Context, tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, pgLog, p, seq); err != nil {
						return err
					}
					return call(hook)
				})
			},
			reap: ib.Reap,
		}
	}
	return env{
		open: func(t testing.TB, cfg *inbox.Config) consumer { return mk(t, pool, cfg) },
		session: func(t testing.TB, cfg *inbox.Config) (consumer, int64) {
			c, err := pool.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Release)
			var pid int64
			if err := c.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			return mk(t, c, cfg), pid
		},
		waiting: func(t testing.TB, ids []int64) int {
			var n int
			err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1) AND wait_event_type = 'Lock'`, ids).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
		inCallerTx: func(t testing.TB, id string, commit bool) (bool, error) {
			ctx := t.Context()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			ok, err := mk(t, tx, nil).handle(ctx, "billing", id, nil)
			if err != nil {
				return ok, err
			}
			if commit {
				return ok, tx.Commit(ctx)
			}
			return ok, tx.Rollback(ctx)
		},
		callerTx: func(t testing.TB, commit bool, run func(c consumer)) {
			ctx := t.Context()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			run(mk(t, tx, nil))
			if commit {
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		},
		query: func(t testing.TB, q string) [][2]string { return pgRows(t, pool, q) },
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

func openMySQL(t testing.TB, foundRows bool) env {
	t.Helper()
	dsn := testkit.MySQLDSN(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, dsn); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = foundRows
	db := testkit.MySQLFor(t, cfg.FormatDSN())
	if _, err := db.ExecContext(t.Context(), myDDL); err != nil {
		t.Fatal(err)
	}
	return mysqlEnv(db, db)
}

// openGalera is the MariaDB backend on testkit's Galera cluster: the
// inboxes run on the pool spread over the three nodes (so concurrent
// deliveries are handled on different nodes), the test's own queries on
// the synced pool.
func openGalera(t testing.TB) env {
	t.Helper()
	c := galeratest.New(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, c.DSNs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Synced.ExecContext(t.Context(), myDDL); err != nil {
		t.Fatal(err)
	}
	c.Sync(t)
	e := mysqlEnv(c.Pool, c.Synced)
	e.galera = c
	return e
}

// myConsumer is an inbox on h with the suite's effects.
func myConsumer(t testing.TB, h inboxmysql.DBTX, cfg *inbox.Config) consumer {
	ib, err := inboxmysql.New(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return consumer{
		handle: func(ctx context.Context, c, id string, hook func() error) (bool, error) {
			return ib.Handle(ctx, c, id, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, myEffect, id); err != nil {
					return err
				}
				return call(hook)
			})
		},
		handleSeq: func(ctx context.Context, c, p string, seq int64, hook func() error) (inbox.SeqResult, error) {
			return ib.HandleSequence(ctx, c, p, seq, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, myLog, p, seq); err != nil {
					return err
				}
				return call(hook)
			})
		},
		reap: ib.Reap,
	}
}

// mysqlEnv is the env of a MariaDB database where the migrations and
// myDDL were applied: inboxes on db, the test's queries on read.
func mysqlEnv(db, read *sql.DB) env {
	mk := myConsumer
	return env{
		open: func(t testing.TB, cfg *inbox.Config) consumer { return mk(t, db, cfg) },
		session: func(t testing.TB, cfg *inbox.Config) (consumer, int64) {
			c, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			var id int64
			if err := c.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			return mk(t, c, cfg), id
		},
		waiting: func(t testing.TB, ids []int64) int {
			var in []string
			for _, id := range ids {
				in = append(in, strconv.FormatInt(id, 10))
			}
			var n int
			// information_schema.innodb_trx does not list every waiting
			// transaction on MariaDB 10.11; the process list shows them all.
			q := "SELECT COUNT(*) FROM information_schema.processlist WHERE command IN ('Query', 'Execute') AND info LIKE 'INSERT INTO `concurkit_inbox`%' AND id IN (" + strings.Join(in, ",") + ")"
			if err := read.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		inCallerTx: func(t testing.TB, id string, commit bool) (bool, error) {
			ctx := t.Context()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			ok, err := mk(t, tx, nil).handle(ctx, "billing", id, nil)
			if err != nil {
				return ok, err
			}
			if commit {
				return ok, tx.Commit()
			}
			return ok, tx.Rollback()
		},
		callerTx: func(t testing.TB, commit bool, run func(c consumer)) {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			run(mk(t, tx, nil))
			if commit {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
		},
		query: func(t testing.TB, q string) [][2]string {
			t.Helper()
			rows, err := read.QueryContext(context.WithoutCancel(t.Context()), q)
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
	}
}

// fakeClock is an injected Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

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

// ids returns n message ids with a prefix.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}
