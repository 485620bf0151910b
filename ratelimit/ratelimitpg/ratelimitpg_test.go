package ratelimitpg_test

import (
	"context"
	"errors"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitpg"
	"github.com/concurkit/concurkit/ratelimit/ratelimittest"
	"github.com/concurkit/concurkit/testkit"
)

// schema returns the URL of a fresh schema with the toolkit migrations
// applied (the rate-limit tables among them).
func schema(t testing.TB) string {
	t.Helper()
	url := testkit.PostgresURL(t)
	if err := migrations.Up(t.Context(), migrations.Postgres, url); err != nil {
		t.Fatal(err)
	}
	return url
}

func newLimiter(t testing.TB, db ratelimitpg.DBTX, cfg *ratelimitpg.Config) *ratelimitpg.Limiter {
	t.Helper()
	l, err := ratelimitpg.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSuite runs the conformance suite: each limiter on a connection of
// its own.
func TestSuite(t *testing.T) {
	url := schema(t)
	ratelimittest.Run(t, func(t *testing.T, a ratelimit.Algorithm, now func() time.Time) ratelimit.Limiter {
		return newLimiter(t, testkit.PostgresConn(t, url), &ratelimitpg.Config{Algorithm: a, Now: now})
	}, nil)
}

// TestSuitePool: the same on one pool shared by every limiter (the usual
// deployment inside one process).
func TestSuitePool(t *testing.T) {
	pool := testkit.PostgresPoolFor(t, schema(t))
	ratelimittest.Run(t, func(t *testing.T, a ratelimit.Algorithm, now func() time.Time) ratelimit.Limiter {
		return newLimiter(t, pool, &ratelimitpg.Config{Algorithm: a, Now: now})
	}, &ratelimittest.Options{ModelCalls: 50})
}

// TestTransaction: inside a caller's transaction, a rollback takes the
// request back.
func TestTransaction(t *testing.T) {
	pool := testkit.PostgresPoolFor(t, schema(t))
	ctx := t.Context()
	clock := ratelimittest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	limit := ratelimit.Limit{Rate: 1, Period: time.Minute}
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
		key := ratelimittest.Key(t)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			d, err := newLimiter(t, tx, &ratelimitpg.Config{Algorithm: a, Now: clock.Now}).Allow(ctx, key, limit)
			if err != nil || !d.Allowed {
				t.Fatalf("%v in a transaction: %+v, %v", a, d, err)
			}
			return errors.New("roll back")
		})
		if err == nil {
			t.Fatal("BeginFunc did not roll back")
		}
		if d, err := newLimiter(t, pool, &ratelimitpg.Config{Algorithm: a, Now: clock.Now}).Allow(ctx, key, limit); err != nil || !d.Allowed {
			t.Fatalf("%v after the rollback: %+v, %v; want the quota back", a, d, err)
		}
	}
}

// TestReap: rows whose state is over (by the limiter's clock, past the
// grace) go, in batches; live rows stay and keep their counts.
func TestReap(t *testing.T) {
	pool := testkit.PostgresPoolFor(t, schema(t))
	ctx := t.Context()
	clock := ratelimittest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		a     ratelimit.Algorithm
		table string
	}{{ratelimit.FixedWindow, ratelimitpg.WindowTable}, {ratelimit.GCRA, ratelimitpg.GCRATable}} {
		l := newLimiter(t, pool, &ratelimitpg.Config{Algorithm: tc.a, Now: clock.Now})
		short := ratelimit.Limit{Rate: 5, Period: time.Second}
		long := ratelimit.Limit{Rate: 5, Period: time.Hour}
		for i := range 25 {
			if _, err := l.Allow(ctx, "short:"+string(rune('a'+i)), short); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.AllowN(ctx, "long", long, 2); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Reap(ctx, nil); err != nil || n != 0 {
			t.Fatalf("%v: reap before anything ended: %d, %v", tc.a, n, err)
		}
		clock.Advance(2 * time.Second) // the short rows ended, within the grace
		if n, err := l.Reap(ctx, nil); err != nil || n != 0 {
			t.Fatalf("%v: reap within the grace: %d, %v", tc.a, n, err)
		}
		clock.Advance(ratelimitpg.DefaultReapGrace)
		if n, err := l.Reap(ctx, &ratelimitpg.ReapOptions{Batch: 10}); err != nil || n != 25 {
			t.Fatalf("%v: reap in batches of 10: %d, %v; want 25", tc.a, n, err)
		}
		var rows int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{tc.table}.Sanitize()).Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("%v: %d rows left (%v), want the long one", tc.a, rows, err)
		}
		if d, err := l.AllowN(ctx, "long", long, 3); err != nil || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("%v: the live row lost its count: %+v, %v", tc.a, d, err)
		}
		for _, o := range []*ratelimitpg.ReapOptions{{Batch: -1}, {Grace: -time.Second}} {
			if _, err := l.Reap(ctx, o); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("Reap(%+v): %v", *o, err)
			}
		}
	}
}

// TestSchemaAndMissingTable: Config.Schema names the tables' schema; a
// schema without them gives PostgreSQL's undefined_table, wrapped.
func TestSchemaAndMissingTable(t *testing.T) {
	url := schema(t)
	pool := testkit.PostgresPoolFor(t, url)
	var name string
	if err := pool.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	// The migration's tables are unlogged (soft state: see the doc).
	for _, table := range []string{ratelimitpg.WindowTable, ratelimitpg.GCRATable} {
		var persistence string
		if err := pool.QueryRow(t.Context(), `SELECT relpersistence::text FROM pg_class WHERE oid = to_regclass($1)`, table).Scan(&persistence); err != nil || persistence != "u" {
			t.Errorf("%s: relpersistence %q (%v), want u (unlogged)", table, persistence, err)
		}
	}
	other := testkit.Postgres(t) // another schema, without the tables
	limit := ratelimit.Limit{Rate: 1, Period: time.Second}
	if d, err := newLimiter(t, other, &ratelimitpg.Config{Schema: name}).Allow(t.Context(), "k", limit); err != nil || !d.Allowed {
		t.Fatalf("Config.Schema %q: %+v, %v", name, d, err)
	}
	_, err := newLimiter(t, other, nil).Allow(t.Context(), "k", limit)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("missing table: %v, want SQLSTATE 42P01", err)
	}
}

func TestNew(t *testing.T) {
	var nilPool *pgxpool.Pool
	for name, db := range map[string]ratelimitpg.DBTX{"nil": nil, "typed nil": nilPool} {
		if _, err := ratelimitpg.New(db, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%s db): %v", name, err)
		}
	}
	pool := testkit.Postgres(t)
	for name, cfg := range map[string]*ratelimitpg.Config{
		"unknown algorithm": {Algorithm: 7},
		"schema with NUL":   {Schema: "a\x00b"},
		"schema too long":   {Schema: string(make([]byte, 64))},
	} {
		if _, err := ratelimitpg.New(pool, cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	var zero *ratelimitpg.Limiter
	ctx := t.Context()
	if _, err := zero.Allow(ctx, "k", ratelimit.Limit{Rate: 1, Period: time.Second}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil Limiter: %v", err)
	}
	if _, err := (&ratelimitpg.Limiter{}).Reap(ctx, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("zero Limiter Reap: %v", err)
	}
	l := newLimiter(t, pool, nil)
	if err := l.Reset(ctx, ""); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Reset of an empty key: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Reap(cancelled, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Reap with a cancelled context: %v", err)
	}
}

// TestReset forgets a key's count.
func TestReset(t *testing.T) {
	pool := testkit.PostgresPoolFor(t, schema(t))
	ctx := t.Context()
	limit := ratelimit.Limit{Rate: 1, Period: time.Hour}
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
		l := newLimiter(t, pool, &ratelimitpg.Config{Algorithm: a})
		key := ratelimittest.Key(t)
		for i, want := range []bool{true, false} {
			if d, err := l.Allow(ctx, key, limit); err != nil || d.Allowed != want {
				t.Fatalf("%v call %d: %+v, %v", a, i, d, err)
			}
		}
		if err := l.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		if d, err := l.Allow(ctx, key, limit); err != nil || !d.Allowed {
			t.Fatalf("%v after Reset: %+v, %v", a, d, err)
		}
	}
}
