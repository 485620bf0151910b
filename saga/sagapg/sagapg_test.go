package sagapg_test

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/internal/sagatest"
	"github.com/concurkit/concurkit/saga/sagapg"
	"github.com/concurkit/concurkit/testkit"
)

// TestSuite runs the saga suite on PostgreSQL.
func TestSuite(t *testing.T) { sagatest.Run(t, harness) }

// sagaDDL is the toolkit migration of the sagas table.
func sagaDDL(t *testing.T) string {
	t.Helper()
	fsys, err := migrations.FS(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, "0004_saga.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newStore(t *testing.T, db sagapg.DBTX) *sagapg.Store {
	t.Helper()
	s, err := sagapg.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// harness returns the suite's harness on a fresh schema holding the
// sagas table (the toolkit migration) and the effects table.
func harness(t *testing.T) *sagatest.Harness {
	url := testkit.PostgresURL(t)
	pool := testkit.PostgresPoolFor(t, url)
	for _, ddl := range []string{sagaDDL(t), sagatest.EffectsDDLPostgres} {
		if _, err := pool.Exec(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	main := newStore(t, pool)
	return &sagatest.Harness{
		Store: func(t *testing.T) saga.Store { return newStore(t, testkit.PostgresPoolFor(t, url)) },
		Crashable: func(t *testing.T) (saga.Store, func()) {
			conn := testkit.PostgresConn(t, url)
			pid := conn.PgConn().PID()
			return newStore(t, conn), func() {
				// Waits (up to 10 s) until the backend is gone, so the
				// store's next statement surely fails.
				var ok bool
				if err := pool.QueryRow(context.WithoutCancel(t.Context()), "SELECT pg_terminate_backend($1, 10000)", pid).Scan(&ok); err != nil || !ok {
					t.Errorf("pg_terminate_backend(%d): %v %v", pid, ok, err)
				}
			}
		},
		Effect: func(ctx context.Context, key string) error {
			_, err := pool.Exec(ctx, `INSERT INTO saga_effects (effect_key) VALUES ($1)
				ON CONFLICT (effect_key) DO UPDATE SET applied = saga_effects.applied + 1`, key)
			return err
		},
		Effects: func(ctx context.Context) ([]string, error) {
			rows, err := pool.Query(ctx, `SELECT effect_key FROM saga_effects`)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var keys []string
			for rows.Next() {
				var k string
				if err := rows.Scan(&k); err != nil {
					return nil, err
				}
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return keys, rows.Err()
		},
		LockRow: func(t *testing.T, key string) (time.Time, func()) {
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			unlock := func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }
			var lease time.Time
			if err := tx.QueryRow(t.Context(), "SELECT lease_until FROM concurkit_sagas WHERE saga_key = $1 FOR UPDATE", key).Scan(&lease); err != nil {
				unlock()
				t.Fatal(err)
			}
			return lease, unlock
		},
		Load:       main.Load,
		Unfinished: main.Unfinished,
	}
}

func TestBadInput(t *testing.T) {
	var nilPool *pgxpool.Pool
	for name, db := range map[string]sagapg.DBTX{"nil": nil, "typed nil": nilPool} {
		if _, err := sagapg.New(db, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%s): %v", name, err)
		}
	}
	pool := testkit.Postgres(t)
	for _, tbl := range []saga.Table{{Name: strings.Repeat("t", 64)}, {Schema: "a\x00", Name: "t"}} {
		if _, err := sagapg.New(pool, &sagapg.Config{Table: tbl}); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%+v): %v", tbl, err)
		}
	}
	s := newStore(t, pool)
	ctx := t.Context()
	if _, _, err := s.Claim(ctx, nil, time.Now()); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Claim(nil): %v", err)
	}
	if err := s.Save(ctx, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Save(nil): %v", err)
	}
	if _, err := s.Unfinished(ctx, time.Now(), 0); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Unfinished(limit 0): %v", err)
	}
	if _, err := s.DeleteFinished(ctx, time.Now(), 0); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("DeleteFinished(limit 0): %v", err)
	}
}

// TestTableAndReaper: a store on a schema-qualified table of another name;
// DeleteFinished removes finished instances updated before the cutoff
// only, in batches.
func TestTableAndReaper(t *testing.T) {
	pool := testkit.Postgres(t)
	ctx := t.Context()
	other := testkit.Name("ck_other_")
	ddl := strings.NewReplacer("EXISTS concurkit_sagas (", "EXISTS "+other+".my_sagas (", "ON concurkit_sagas ", "ON "+other+".my_sagas ").Replace(sagaDDL(t))
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+other+";"+ddl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+other+" CASCADE") })
	s, err := sagapg.New(pool, &sagapg.Config{Table: saga.Table{Schema: other, Name: "my_sagas"}})
	if err != nil {
		t.Fatal(err)
	}
	sagatest.Reaper(t, s, s.DeleteFinished, s.Load)
}

func BenchmarkRun(b *testing.B) {
	pool := testkit.Postgres(b)
	fsys, err := migrations.FS(migrations.Postgres)
	if err != nil {
		b.Fatal(err)
	}
	ddl, err := fs.ReadFile(fsys, "0004_saga.up.sql")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(b.Context(), string(ddl)); err != nil {
		b.Fatal(err)
	}
	s, err := sagapg.New(pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	sagatest.Bench(b, s)
}
