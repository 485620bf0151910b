package inboxpg_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// TestDuplicateWaitsForStandby: on a primary with a synchronous standby,
// the record of a handled message becomes visible on the primary before
// the standby has it when its commit's wait is cut short (here its
// session is terminated). A redelivery must not be called a duplicate then
// — the transport would drop the message, and a failover would lose its
// record and its effects: the message, lost. The redelivery waits until
// the record is on the standby; here it never is, so it gives up at its
// deadline, and after the failover neither record nor effect is there.
func TestDuplicateWaitsForStandby(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nodes := testkit.StartPostgresReplication(t, true)
	if err := migrations.Up(ctx, migrations.Postgres, nodes[0].URL()); err != nil {
		t.Fatal(err)
	}
	pool := testkit.PostgresPoolFor(t, nodes[0].URL())
	if _, err := pool.Exec(ctx, `CREATE TABLE shipped (order_id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	ib, err := inboxpg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ship := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO shipped VALUES ('o-1')`)
		return err
	}
	senders := nodes[0].FreezeWALSenders(t)
	done := make(chan error, 1)
	go func() {
		_, err := ib.Handle(ctx, "shipping", "msg-1", ship)
		done <- err
	}()
	admin := testkit.PostgresConn(t, nodes[0].URL())
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", nodes[0].WaitingForStandby(t)[0]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("Handle succeeded on a terminated session")
	}
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM shipped`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the effect on the primary: %d rows, %v; want it committed there", n, err)
	}

	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	processed, err := ib.Handle(rctx, "shipping", "msg-1", ship)
	if err == nil {
		t.Fatalf("the redelivery: processed=%v, nil error — a duplicate reported before the standby had the record", processed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the redelivery: %v; want it to wait for the standby until its deadline", err)
	}

	for _, pid := range senders {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	nodes[0].Kill(t)
	nodes[1].Promote(t)
	standby := testkit.PostgresConn(t, nodes[1].URL())
	if err := standby.QueryRow(ctx, `SELECT count(*) FROM shipped`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the promoted standby: %d effects, %v; the test did not keep the record from it", n, err)
	}
}
