package hotrowpg_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowpg"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var stock = hotrow.Table{Name: "stock"}

// pool returns a pool on an isolated schema with table stock holding rows.
func pool(t testing.TB, rows map[int64]int64) *pgxpool.Pool {
	t.Helper()
	p, _ := poolURL(t, rows)
	return p
}

// poolURL is pool, and the URL of its schema.
func poolURL(t testing.TB, rows map[int64]int64) (*pgxpool.Pool, string) {
	t.Helper()
	u := testkit.PostgresURL(t)
	p := testkit.PostgresPoolFor(t, u)
	if _, err := p.Exec(t.Context(), `CREATE TABLE stock (id bigint PRIMARY KEY, v bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for id, v := range rows {
		if _, err := p.Exec(t.Context(), `INSERT INTO stock VALUES ($1, $2)`, id, v); err != nil {
			t.Fatal(err)
		}
	}
	return p, u
}

func value(t *testing.T, db hotrowpg.DBTX, id int64) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow(t.Context(), `SELECT v FROM stock WHERE id = $1`, id).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAdd: the escrow update, its refusals, and arithmetic at the edges.
func TestAdd(t *testing.T) {
	p := pool(t, map[int64]int64{1: 5, 2: math.MaxInt64 - 1, 3: math.MinInt64 + 1})
	ctx := t.Context()
	zero := hotrow.AtLeast(0)
	for _, tc := range []struct {
		id, delta int64
		floor     *int64
		want      int64
		err       error
	}{
		{1, -3, zero, 2, nil},
		{1, -3, zero, 0, hotrow.ErrInsufficient},
		{1, -2, zero, 0, nil},
		{1, 0, zero, 0, nil},
		{1, 7, zero, 7, nil},
		{1, -8, nil, -1, nil},                    // no floor: a counter
		{1, -1, zero, 0, hotrow.ErrInsufficient}, // already below the floor
		{1, 1, zero, 0, nil},                     // increments are never refused
		{2, 1, nil, math.MaxInt64, nil},
		{2, 1, nil, 0, hotrow.ErrOverflow},
		{2, math.MinInt64, zero, 0, hotrow.ErrInsufficient},
		{2, math.MinInt64, nil, -1, nil},
		{3, -1, nil, math.MinInt64, nil},
		{3, -1, nil, 0, hotrow.ErrOverflow},
		{3, math.MinInt64, hotrow.AtLeast(math.MinInt64), 0, hotrow.ErrOverflow}, // both: the range first
		{4, 1, nil, 0, hotrow.ErrNotFound},
	} {
		v, err := hotrowpg.Add(ctx, p, stock, tc.id, tc.delta, tc.floor)
		if v != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("Add(%d, %d, floor %v) = %d, %v; want %d, %v", tc.id, tc.delta, tc.floor != nil, v, err, tc.want, tc.err)
		}
	}
	if v := value(t, p, 2); v != -1 {
		t.Errorf("row 2 = %d, want -1", v)
	}
}

// TestAddInTransaction: a refused update leaves the caller's transaction
// usable (no 22003 aborting it), under READ COMMITTED and REPEATABLE READ;
// under REPEATABLE READ a row changed after the snapshot is a definite
// serialization failure, not an ambiguous outcome.
func TestAddInTransaction(t *testing.T) {
	p := pool(t, map[int64]int64{1: 1, 2: math.MaxInt64})
	ctx := t.Context()
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead} {
		tx, err := p.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hotrowpg.Add(ctx, tx, stock, 1, -2, hotrow.AtLeast(0)); !errors.Is(err, hotrow.ErrInsufficient) {
			t.Errorf("%s: %v, want ErrInsufficient", iso, err)
		}
		if _, err := hotrowpg.Add(ctx, tx, stock, 2, 1, nil); !errors.Is(err, hotrow.ErrOverflow) {
			t.Errorf("%s: %v, want ErrOverflow", iso, err)
		}
		if v, err := hotrowpg.Add(ctx, tx, stock, 1, -1, hotrow.AtLeast(0)); err != nil || v != 0 {
			t.Errorf("%s: Add after refusals = %d, %v", iso, v, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := p.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	value(t, tx, 1) // takes the snapshot
	if _, err := hotrowpg.Add(ctx, p, stock, 1, 5, nil); err != nil {
		t.Fatal(err)
	}
	_, err = hotrowpg.Add(ctx, tx, stock, 1, -1, hotrow.AtLeast(0))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "40001" || errors.Is(err, concurkit.ErrOutcomeUnknown) {
		t.Errorf("REPEATABLE READ after a concurrent update: %v, want a definite 40001", err)
	}
}

// TestStockExact: the shared suite's 10,000 concurrent decrements of a
// stock of 1,000 (escrow and combined), on the default pool.
func TestStockExact(t *testing.T) {
	p := pool(t, map[int64]int64{1: hotrowtest.Stock, 2: hotrowtest.Stock})
	st, err := hotrowpg.NewStore[int64](p, stock)
	if err != nil {
		t.Fatal(err)
	}
	hotrowtest.StockExact(t, st, func(ctx context.Context, id, delta int64, floor *int64) (int64, error) {
		return hotrowpg.Add(ctx, p, stock, id, delta, floor)
	}, func(t *testing.T, id int64) int64 { return value(t, p, id) })
}

// TestCombinerFrozenServer: the server freezes while a batch is at it.
// Callers whose context ends are told the outcome is unknown; once the
// server answers, the batch's callers that still wait get its real
// outcome, and the row holds exactly the updates reported applied plus a
// subset of the unknown ones.
func TestCombinerFrozenServer(t *testing.T) {
	p, schemaURL := poolURL(t, map[int64]int64{1: 0})
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	pp := testkit.PostgresPoolFor(t, u.String())
	st, err := hotrowpg.NewStore[int64](pp, stock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hotrow.NewCombiner[int64](st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Add(t.Context(), 1, 1); err != nil {
		t.Fatal(err)
	}
	proxy.Freeze()
	ctx, cancel := context.WithCancel(t.Context())
	type res struct {
		v   int64
		err error
	}
	leaving, staying := make(chan res, 1), make(chan res, 1)
	go func() { v, err := c.Add(ctx, 1, 10); leaving <- res{v, err} }()
	go func() { v, err := c.Add(t.Context(), 1, 100); staying <- res{v, err} }()
	cancel()
	r := <-leaving
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("caller that left: %+v, want context.Canceled", r)
	}
	proxy.Thaw()
	s := <-staying
	if s.err != nil {
		t.Fatalf("caller that stayed: %+v", s)
	}
	got := value(t, p, 1)
	applied10 := !errors.Is(r.err, hotrow.ErrNotApplied)
	switch {
	case got == 101 && s.v == 101:
	case got == 111 && applied10 && (s.v == 111 || s.v == 101):
	default:
		t.Errorf("row %d, stayer %d, leaver %v: applied updates do not add up", got, s.v, r.err)
	}
}

func TestBadInput(t *testing.T) {
	var nilPool *pgxpool.Pool
	ctx := t.Context()
	for name, err := range map[string]error{
		"nil db":       func() error { _, err := hotrowpg.Add(ctx, nil, stock, 1, 1, nil); return err }(),
		"typed-nil db": func() error { _, err := hotrowpg.Add(ctx, nilPool, stock, 1, 1, nil); return err }(),
		"empty table":  func() error { _, err := hotrowpg.Add(ctx, testkit.Postgres(t), hotrow.Table{}, 1, 1, nil); return err }(),
		"bad column": func() error {
			_, err := hotrowpg.NewStore[int64](testkit.Postgres(t), hotrow.Table{Name: "t", ValueColumn: "a\x00b"})
			return err
		}(),
		"nil store db": func() error { _, err := hotrowpg.NewStore[int64](nilPool, stock); return err }(),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestCombinerKilledClient: a client process with 32 goroutines adding
// through one Combiner is SIGKILLed mid-stream (batches in flight): the
// row holds every acknowledged update plus at most the in-flight ones,
// never more.
func TestCombinerKilledClient(t *testing.T) {
	if u := os.Getenv(hotrowtest.KillEnv); u != "" {
		p, err := pgxpool.New(context.Background(), u)
		if err != nil {
			fmt.Println("error", err)
			select {}
		}
		st, err := hotrowpg.NewStore[int64](p, stock)
		if err != nil {
			fmt.Println("error", err)
			select {}
		}
		hotrowtest.KilledClientChild(st, 1, os.Stdout)
	}
	p, u := poolURL(t, map[int64]int64{1: 100})
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCombinerKilledClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), hotrowtest.KillEnv+"="+u)
	hotrowtest.KilledClient(t, cmd, 100, func(t *testing.T) int64 { return value(t, p, 1) })
}

// TestVersionColumn: every write of a table with a VersionColumn bumps the
// version, so optimisticpg.Update conflicts with it (hotrowtest.VersionColumn).
func TestVersionColumn(t *testing.T) {
	p := pool(t, map[int64]int64{1: 100, 2: 100})
	if _, err := p.Exec(t.Context(), `ALTER TABLE stock ADD COLUMN version bigint NOT NULL DEFAULT 1`); err != nil {
		t.Fatal(err)
	}
	cas := optimistic.Table{Name: "stock", KeyColumn: "id", VersionColumn: "version"}
	hotrowtest.VersionColumn(t, hotrowtest.Versioned{
		Add: func(ctx context.Context, tbl hotrow.Table, key, delta int64) error {
			_, err := hotrowpg.Add(ctx, p, tbl, key, delta, nil)
			return err
		},
		Store: func(tbl hotrow.Table) (hotrow.Store[int64], error) { return hotrowpg.NewStore[int64](p, tbl) },
		Ledger: func(tbl hotrow.Table) (hotrow.LedgerStore[int64], error) {
			return hotrowpg.NewLedgerStore[int64](p, tbl)
		},
		Row: func(t *testing.T, key int64) (v, version int64) {
			if err := p.QueryRow(t.Context(), `SELECT v, version FROM stock WHERE id = $1`, key).Scan(&v, &version); err != nil {
				t.Fatal(err)
			}
			return v, version
		},
		CAS: func(ctx context.Context, key, version, v int64) error {
			_, err := optimisticpg.Update(ctx, p, cas, key, version, map[string]any{"v": v})
			return err
		},
	})
}
