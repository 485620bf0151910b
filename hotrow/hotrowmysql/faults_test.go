package hotrowmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowmysql"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
	"github.com/concurkit/concurkit/testkit"
)

// proxied returns a *sql.DB on dsn's database through a new testkit.Proxy,
// keeping at most one idle connection: a test that makes one call before
// freezing the proxy knows the next call reuses that call's connection
// (a new one could not even finish its handshake through the frozen proxy).
func proxied(t *testing.T, dsn string) (*sql.DB, *testkit.Proxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr
	db := testkit.MySQLFor(t, cfg.FormatDSN())
	db.SetMaxIdleConns(1)
	return db, proxy
}

// TestShardedAnswerLost: a Take and an Add reach the server but their
// answers are held until the callers give up. The KILL QUERY that would
// settle the outcome cannot get through either, so each is told the
// outcome is unknown (an AmbiguousCommitError matching its context's
// error), never "not applied"; the counter holds its start plus a subset
// of the two.
//
// With interpolateParams the write is one COM_QUERY the server runs
// (the counter ends at 12); without, the held answer is the prepare's and
// the write never goes (10): the caller cannot tell the two apart.
func TestShardedAnswerLost(t *testing.T) {
	for _, ip := range []string{"false", "true"} {
		t.Run("interpolateParams="+ip, func(t *testing.T) {
			shardedAnswerLost(t, map[string]string{"interpolateParams": ip})
		})
	}
}

func shardedAnswerLost(t *testing.T, params map[string]string) {
	db, dsn := databaseDSN(t, "", params, nil)
	if _, err := db.ExecContext(t.Context(), hotrowtest.ShardTableSQL); err != nil {
		t.Fatal(err)
	}
	pdb, proxy := proxied(t, dsn)
	st, err := hotrowmysql.NewShardStore[int64](pdb, hotrowtest.ShardTable)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hotrow.NewSharded[int64](st, &hotrow.ShardedOptions{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), 1, 10); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"Take(3)", func(ctx context.Context) error { return c.Take(ctx, 1, 3) }},
		{"Add(5)", func(ctx context.Context) error { return c.Add(ctx, 1, 5) }},
	} {
		// A +1 and a -1 that return: the pool's one idle connection
		// has asked its thread id, so the held call sends its write.
		if err := c.Add(t.Context(), 1, 1); err != nil {
			t.Fatal(err)
		}
		if err := c.Take(t.Context(), 1, 1); err != nil {
			t.Fatal(err)
		}
		proxy.FreezeReplies()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		err := tc.op(ctx)
		cancel()
		proxy.Thaw()
		var amb *concurkit.AmbiguousCommitError
		if !errors.As(err, &amb) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with its answer held: %v, want an AmbiguousCommitError matching DeadlineExceeded", tc.name, err)
		}
	}
	var v int64
	if err := db.QueryRowContext(t.Context(), `SELECT SUM(v) FROM shards WHERE id = 1`).Scan(&v); err != nil || (v != 10 && v != 7 && v != 15 && v != 12) {
		t.Errorf("counter %d (%v), want 10 plus a subset of -3 and +5", v, err)
	}
	t.Logf("counter after the unknown outcomes: %d", v)
}

// TestCombinerFrozenServer: the server freezes while a batch is at it.
// Callers whose context ends are told the outcome is unknown; once the
// server answers, the batch's callers that still wait get its real
// outcome, and the row holds exactly the updates reported applied plus a
// subset of the unknown ones.
func TestCombinerFrozenServer(t *testing.T) {
	db, dsn := databaseDSN(t, "", nil, map[int64]int64{1: 0})
	pdb, proxy := proxied(t, dsn)
	st, err := hotrowmysql.NewStore[int64](pdb, stock)
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
	got := value(t, db, 1)
	applied10 := !errors.Is(r.err, hotrow.ErrNotApplied)
	switch {
	case got == 101 && s.v == 101:
	case got == 111 && applied10 && (s.v == 111 || s.v == 101):
	default:
		t.Errorf("row %d, stayer %d, leaver %v: applied updates do not add up", got, s.v, r.err)
	}
}
