package pessimisticpg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

func acquire(t *testing.T, pool *pgxpool.Pool) *pgxpool.Conn {
	t.Helper()
	c, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	return c
}

func TestAdvisorySessionLock(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	a, b := acquire(t, pool), acquire(t, pool)
	key := pessimistic.AdvisoryKey("orders/42")

	la, err := pessimisticpg.TryAdvisoryLock(ctx, a.Conn(), key)
	if err != nil {
		t.Fatal(err)
	}
	if la.Key() != key {
		t.Errorf("Key() = %d, want %d", la.Key(), key)
	}
	// Held by session a: b's tries fail, at session and transaction level.
	if _, err := pessimisticpg.TryAdvisoryLock(ctx, b.Conn(), key); !errors.Is(err, pessimistic.ErrLockNotAvailable) {
		t.Fatalf("try while held: %v, want ErrLockNotAvailable", err)
	}
	err = pessimisticpg.InTx(ctx, b, nil, func(ctx context.Context, tx pgx.Tx) error {
		return pessimisticpg.TryAdvisoryXactLock(ctx, tx, key)
	})
	if !errors.Is(err, pessimistic.ErrLockNotAvailable) {
		t.Fatalf("xact try while held: %v, want ErrLockNotAvailable", err)
	}
	// A transaction's end does not release a session lock.
	if err := pessimisticpg.InTx(ctx, a, nil, func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := pessimisticpg.TryAdvisoryLock(ctx, b.Conn(), key); !errors.Is(err, pessimistic.ErrLockNotAvailable) {
		t.Fatalf("try after a's transaction: %v, want ErrLockNotAvailable", err)
	}

	// A blocking AdvisoryLock on b waits until a releases.
	got := make(chan error, 1)
	var lb *pessimisticpg.SessionLock
	go func() {
		var err error
		lb, err = pessimisticpg.AdvisoryLock(ctx, b.Conn(), key)
		got <- err
	}()
	waiter := b.Conn().PgConn().PID()
	eventually(t, "b to wait for the advisory lock", 2*time.Millisecond, func() (bool, error) {
		var n int
		err := a.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'advisory'", waiter).Scan(&n)
		return n == 1, err
	})
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("blocking lock after release: %v", err)
	}
	// Now b holds it; a's try fails; b's release frees it.
	if _, err := pessimisticpg.TryAdvisoryLock(ctx, a.Conn(), key); !errors.Is(err, pessimistic.ErrLockNotAvailable) {
		t.Fatalf("a's try while b holds: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Errorf("second Release = %v, want the first call's nil", err)
	}
	l, err := pessimisticpg.TryAdvisoryLock(ctx, a.Conn(), key)
	if err != nil {
		t.Fatalf("try after release: %v", err)
	}
	// Released twice by hand, the server reports the lock as not held.
	if _, err := a.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); !errors.Is(err, pessimistic.ErrNotHeld) {
		t.Errorf("Release of a lock unlocked behind its back = %v, want ErrNotHeld", err)
	}
}

func TestAdvisoryXactLock(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	a, b := acquire(t, pool), acquire(t, pool)
	key := pessimistic.AdvisoryKey("report/daily")
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := pessimisticpg.AdvisoryXactLock(ctx, tx, key); err != nil {
		t.Fatal(err)
	}
	if err := pessimisticpg.TryAdvisoryXactLock(ctx, tx, key); err != nil {
		t.Fatalf("re-taking in the same transaction: %v", err)
	}
	if _, err := pessimisticpg.TryAdvisoryLock(ctx, b.Conn(), key); !errors.Is(err, pessimistic.ErrLockNotAvailable) {
		t.Fatalf("try while held by a transaction: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Released at commit.
	err = pessimisticpg.InTx(ctx, b, nil, func(ctx context.Context, tx pgx.Tx) error {
		if err := pessimisticpg.TryAdvisoryXactLock(ctx, tx, key); err != nil {
			return err
		}
		return pessimisticpg.AdvisoryXactLock(ctx, tx, key)
	})
	if err != nil {
		t.Fatalf("after commit: %v", err)
	}
}
