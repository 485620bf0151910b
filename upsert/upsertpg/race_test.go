package upsertpg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/upsert/upsertpg"
)

// rawInsertOrGet is the single statement InsertOrGet runs, without
// its retry: the negative control below shows why the retry is needed.
const rawInsertOrGet = `WITH ins AS (
	INSERT INTO profiles (id, name, visits) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING id, name, visits
)
SELECT true, id, name, visits FROM ins
UNION ALL
SELECT false, id, name, visits FROM profiles WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ins)`

// TestInsertOrGetPostgresInvisibleConflict forces the READ COMMITTED race:
// a transaction inserts the key and holds it uncommitted; two callers
// block on it inside ON CONFLICT; the holder commits. The statement's
// snapshot predates that commit, so the bare statement returns no row at
// all, while InsertOrGet runs it again and returns the committed
// row with created == false. Inside a REPEATABLE READ transaction the same
// situation is a serialization failure, as documented.
func TestInsertOrGetPostgresInvisibleConflict(t *testing.T) {
	t.Parallel()
	pool := pgPool(t)
	ctx := t.Context()
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	if _, err := holder.Exec(ctx, "INSERT INTO profiles (id, name, visits) VALUES (1, 'ada', 1)"); err != nil {
		t.Fatal(err)
	}
	raw, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Release()
	lib, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()

	// A third caller inside a REPEATABLE READ transaction whose snapshot
	// predates the holder's commit gets a serialization failure instead.
	rr, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Rollback(context.WithoutCancel(ctx))
	var rrPID uint32
	if err := rr.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&rrPID); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	rrDone := make(chan error, 1)
	go func() {
		var p profile
		_, err := upsertpg.InsertOrGet(ctx, rr, tbl, profile{1, "dan", 4}.row(), returning, p.dest()...)
		rrDone <- err
	}()

	rawDone := make(chan error, 1)
	go func() {
		var created bool
		var p profile
		rawDone <- raw.QueryRow(ctx, rawInsertOrGet, 1, "bob", 2).Scan(append([]any{&created}, p.dest()...)...)
	}()
	type result struct {
		p       profile
		created bool
		err     error
	}
	libDone := make(chan result, 1)
	go func() {
		var r result
		r.created, r.err = upsertpg.InsertOrGet(ctx, lib, tbl, profile{1, "cyd", 3}.row(), returning, r.p.dest()...)
		libDone <- r
	}()

	// Wait (on the server's own view) until both block on the holder's row.
	pids := []uint32{raw.Conn().PgConn().PID(), lib.Conn().PgConn().PID(), rrPID}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1) AND wait_event_type = 'Lock'", pids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(pids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("callers never blocked on the uncommitted row")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-rawDone; !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("bare statement: %v; want no rows (the conflicting row is invisible to its snapshot)", err)
	}
	if err := <-rrDone; sqlerr.Classify(err) != sqlerr.Serialization {
		t.Fatalf("REPEATABLE READ caller: %v; want a serialization failure (40001)", err)
	}
	r := <-libDone
	if want := (profile{1, "ada", 1}); r.err != nil || r.created || r.p != want {
		t.Fatalf("InsertOrGet = %+v created=%v err=%v; want %+v, false", r.p, r.created, r.err, want)
	}
}
