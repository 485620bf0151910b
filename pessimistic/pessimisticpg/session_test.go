package pessimisticpg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/testkit"
)

// advisoryLocks returns how many advisory locks the session of q holds.
func advisoryLocks(t *testing.T, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) int {
	t.Helper()
	var n int
	if err := q.QueryRow(t.Context(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSessionLockReleaseCancelledContext: Release with an already
// cancelled context still unlocks, so neither the pool's next borrower of
// the connection (pool of one) holds the lock re-entrantly nor does
// another session find it taken; a second Release repeats the result.
func TestSessionLockReleaseCancelledContext(t *testing.T) {
	pool := pgPool(t, 1)
	ctx := t.Context()
	key := pessimistic.AdvisoryKey(t.Name())
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pessimisticpg.AdvisoryLock(ctx, c.Conn(), key)
	if err != nil {
		c.Release()
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	first := l.Release(cancelled)
	second := l.Release(ctx)
	c.Release()
	if first != nil || second != nil {
		t.Fatalf("Release(cancelled) = %v, then %v; want nil, nil", first, second)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("the pool's next borrower holds %d advisory locks", n)
	}
	other := testkit.PostgresConn(t, testkit.PostgresServerURL(t))
	lo, err := pessimisticpg.TryAdvisoryLock(ctx, other, key)
	if err != nil {
		t.Fatalf("another session after Release(cancelled): %v", err)
	}
	if err := lo.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSessionLockReleaseUnconfirmed: when the server cannot confirm the
// unlock (here: the session is in a failed transaction, so every
// statement is refused), Release closes the connection, which frees the
// lock, and says so; the pool destroys the closed connection.
func TestSessionLockReleaseUnconfirmed(t *testing.T) {
	pool := pgPool(t, 1)
	ctx := t.Context()
	key := pessimistic.AdvisoryKey(t.Name())
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pessimisticpg.AdvisoryLock(ctx, c.Conn(), key)
	if err != nil {
		c.Release()
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("division by zero succeeded")
	}
	err = l.Release(ctx)
	closed := c.Conn().IsClosed()
	c.Release()
	if err == nil || errors.Is(err, pessimistic.ErrNotHeld) || !closed {
		t.Fatalf("Release in a failed transaction = %v (connection closed: %v), want an error and a closed connection", err, closed)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("the pool's next borrower holds %d advisory locks", n)
	}
	other := testkit.PostgresConn(t, testkit.PostgresServerURL(t))
	// The server ends the closed session asynchronously.
	eventually(t, "the closed session's lock to be freed", 5*time.Millisecond, func() (bool, error) {
		lo, err := pessimisticpg.TryAdvisoryLock(ctx, other, key)
		if errors.Is(err, pessimistic.ErrLockNotAvailable) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, lo.Release(ctx)
	})
}
