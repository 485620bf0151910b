package testkit

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/redact"
)

// PostgresMaxConns is the MaxConns of the pools returned here: enough for 64
// goroutines to hold a connection each, with room for the test's own.
const PostgresMaxConns = 100

var postgresServer = &server{
	name:   "PostgreSQL",
	envVar: "CONCURKIT_POSTGRES_URL",
	def:    "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable",
	addrs: func(v string) ([]string, error) {
		cfg, err := pgx.ParseConfig(v)
		if err != nil {
			return nil, err
		}
		return []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}, nil
	},
	container: postgresContainer,
}

// PostgresServerURL returns the URL of the PostgreSQL server itself (no
// isolation): for tests that must see server-wide state. Prefer PostgresURL.
func PostgresServerURL(t testing.TB) string {
	t.Helper()
	return postgresServer.get(t)
}

// Postgres returns a pool whose connections all use a fresh schema ck_<random>
// (search_path set at connect time). MaxConns is PostgresMaxConns. The pool is
// closed and the schema dropped (CASCADE) at cleanup.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PostgresPoolFor(t, PostgresURL(t))
}

// PostgresURL creates a fresh schema ck_<random>, dropped (CASCADE) at cleanup,
// and returns a URL whose connections use it: the server URL plus
// options=-csearch_path=<schema>. Any client that passes libpq's "options" to
// the server (pgx, pgxpool, golang-migrate's pgx5 driver) lands in the schema.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := postgresServer.get(t)
	return withSearchPath(t, base, newSchema(t, base))
}

// newSchema creates a schema ck_<random> on the server at base, dropped at
// cleanup, and returns its name.
func newSchema(t testing.TB, base string) string {
	t.Helper()
	schema := Name("ck_")
	ident := pgx.Identifier{schema}.Sanitize()

	ctx, cancel := setupContext(t)
	defer cancel()
	if err := pgExec(ctx, base, "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("testenv: create schema %s: %v", schema, redact.Error(err, base))
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		// A leaked connection holding a lock must not hang the cleanup forever.
		if err := pgExec(ctx, base, "SET lock_timeout = '20s'; DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
			t.Logf("testenv: drop schema %s: %v", schema, redact.Error(err, base))
		}
	})
	return schema
}

// withSearchPath returns base with options=-csearch_path=<schema>.
func withSearchPath(t testing.TB, base, schema string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: parse %s: %v", redact.DSN(base), redact.Error(err, base))
	}
	q := u.Query()
	// No space in the value: pgx does not decode "+" in URL parameters, and
	// tools (golang-migrate) re-encode a space as "+".
	q.Set("options", "-csearch_path="+schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// PostgresPoolFor returns a new, independent pool (MaxConns PostgresMaxConns)
// for url, typically one from PostgresURL, closed at cleanup. Use it when a
// test needs a second set of connections on the same schema.
func PostgresPoolFor(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("testenv: parse postgres url: %v", redact.Error(err, url))
	}
	cfg.MaxConns = PostgresMaxConns
	ctx, cancel := setupContext(t)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testenv: postgres pool: %v", redact.Error(err, url))
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("testenv: postgres ping: %v", redact.Error(err, url))
	}
	return pool
}

// PostgresConn returns one connection to url (e.g. from PostgresURL), closed
// at cleanup: for tests that need a session of their own.
func PostgresConn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := setupContext(t)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("testenv: postgres connect: %v", redact.Error(err, url))
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}

// pgExec runs sql on a short-lived connection (no pool, so no goroutine
// outlives the call).
func pgExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, err = conn.Exec(ctx, sql)
	return err
}
