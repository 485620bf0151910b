package idempotencypg_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// TestReplayWaitsForStandby: on a primary with a synchronous standby, a
// completion whose commit waits for the standby becomes visible on the
// primary when that wait is cut short — its session terminated (as here,
// or by a pooler), or its statement cancelled — before the standby has
// it. A retry must not replay it then: a failover would lose the stored
// response while the client holds it (a "lost effect"). The retry's claim
// waits until what it read is on the standby; here the standby never gets
// it, so the claim gives up at its deadline, and after the failover the key
// is indeed not finished.
func TestReplayWaitsForStandby(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nodes := testkit.StartPostgresReplication(t, true)
	if err := migrations.Up(ctx, migrations.Postgres, nodes[0].URL()); err != nil {
		t.Fatal(err)
	}
	pool := testkit.PostgresPoolFor(t, nodes[0].URL())
	s, err := idempotencypg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	fp := sha256.Sum256([]byte("POST /pay"))
	now := time.Now()
	req := idempotency.ClaimRequest{Principal: "p", Key: "pay-1", Fingerprint: fp[:], LockID: 7, Now: now, LockTimeout: time.Minute, TTL: time.Hour}
	if _, err := s.Claim(ctx, req); err != nil {
		t.Fatal(err)
	}
	admin := testkit.PostgresConn(t, nodes[0].URL())
	senders := nodes[0].FreezeWALSenders(t)
	done := make(chan error, 1)
	go func() {
		done <- s.Complete(ctx, idempotency.Lock{Principal: "p", Key: "pay-1", ID: 7},
			idempotency.Response{Status: 201, Body: []byte("paid")}, now.Add(time.Hour))
	}()
	// The completion's commit waits for the frozen standby; terminate its
	// session there.
	waiting := nodes[0].WaitingForStandby(t)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", waiting[0]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("Complete succeeded on a terminated session")
	}
	waitFor(t, admin, "SELECT 1 FROM concurkit_idempotency_keys WHERE idempotency_key = 'pay-1' AND recovery_point = 'finished'")

	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req.LockID, req.Now = 8, time.Now()
	rec, err := s.Claim(cctx, req)
	if err == nil && rec.Response != nil {
		t.Fatalf("the retry replayed %d %q, a completion the synchronous standby does not have", rec.Response.Status, rec.Response.Body)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the retry's claim: %+v, %v; want it to wait for the standby until its deadline", rec, err)
	}

	// The failover: the standby never had the completion.
	for _, pid := range senders {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	nodes[0].Kill(t)
	nodes[1].Promote(t)
	standby := testkit.PostgresConn(t, nodes[1].URL())
	var point string
	if err := standby.QueryRow(ctx, "SELECT recovery_point FROM concurkit_idempotency_keys WHERE idempotency_key = 'pay-1'").Scan(&point); err != nil {
		t.Fatal(err)
	}
	if point == "finished" {
		t.Fatal("the promoted standby has the completion: the test did not keep it from the standby")
	}
}

// waitFor polls q until it returns a row (bounded by 30 s).
func waitFor(t *testing.T, c *pgx.Conn, q string) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, err := c.Query(ctx, q)
		if err == nil {
			out, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err == nil && len(out) > 0 {
				return out
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no row: %v", q, ctx.Err())
		case <-tick.C:
		}
	}
}
