package optimisticpg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
)

// waitFor polls cond (a query of the server's own lock-wait view) until it
// reports true: the server, not a sleep, tells us the CAS is blocked.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		// InnoDB rebuilds its INNODB_TRX cache only when the last read is
		// over 100 ms old: polling faster can keep a stale snapshot (no
		// LOCK WAIT) forever. 150 ms lets it refresh between polls.
		time.Sleep(150 * time.Millisecond)
	}
}

// promptBound is how long a cancelled CAS may take to return. The lock is
// held indefinitely (and lock_timeout / innodb_lock_wait_timeout are far
// larger), so returning at all before the holder lets go shows cancellation
// worked; the bound only keeps a broken build from hanging.
const promptBound = 5 * time.Second

type blockedCAS struct {
	err     error
	elapsed time.Duration
}

// cancelBlocked starts update on its own goroutine, waits until blocked()
// says it waits for a lock, cancels its context and returns what it
// returned and how long that took after the cancel.
func cancelBlocked(t *testing.T, update func(ctx context.Context) error, blocked func() (bool, error)) blockedCAS {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- update(ctx) }()
	waitFor(t, "the CAS to wait on the row lock", blocked)
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		return blockedCAS{err, time.Since(cancelled)}
	case <-time.After(promptBound):
		t.Fatalf("CAS still blocked %v after cancel", promptBound)
		return blockedCAS{}
	}
}

func TestCancelWhileLockedPostgres(t *testing.T) {
	t.Parallel()
	pool := pgPool(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'sku-1', 5)"); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	if _, err := holder.Exec(ctx, "SELECT 1 FROM inventory WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waiter, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Release()
	pid := waiter.Conn().PgConn().PID()
	tbl := optimistic.Table{Name: "inventory", KeyColumn: "id", VersionColumn: "version"}
	res := cancelBlocked(t,
		func(ctx context.Context) error {
			_, err := optimisticpg.Update(ctx, waiter, tbl, 1, 1, map[string]any{"stock": 4})
			return err
		},
		func() (bool, error) {
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", pid).Scan(&n)
			return n == 1, err
		})
	t.Logf("postgres: returned %v after cancel: %v", res.elapsed, res.err)
	if !errors.Is(res.err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", res.err)
	}
}
