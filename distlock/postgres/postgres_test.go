package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/postgres"
	"github.com/concurkit/concurkit/internal/locktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newLocker(t *testing.T) distlock.Locker {
	t.Helper()
	l, err := postgres.New(pool(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConformance(t *testing.T) {
	locktest.Run(t, newLocker, locktest.Options{})
}

// terminate ends the holder's server session, as a crash, a partition
// detected by the server or an operator would.
func terminate(t *testing.T, l distlock.Lease) {
	t.Helper()
	var ok bool
	if err := pool(t).QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", int32(l.(*postgres.Lease).BackendPID())).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend: %v, %v", ok, err)
	}
}

// TestKleppmannTerminated: the pause maps to the holder's session dying
// (terminated while the holder is paused).
func TestKleppmannTerminated(t *testing.T) {
	locktest.Kleppmann(t, newLocker, locktest.Options{Expire: terminate})
}

func TestReleaseTerminatedKeepsSuccessor(t *testing.T) {
	locktest.ReleaseExpiredKeepsSuccessor(t, newLocker, locktest.Options{Expire: terminate})
}

// TestTerminateBackendCancelsLease: pg_terminate_backend of the holder's
// session cancels its lease context at once (no polling interval to wait
// for) and frees the lock for another locker.
func TestTerminateBackendCancelsLease(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after the pools close
	func() {
		la, lb := newLocker(t), newLocker(t)
		key := locktest.Key(t)
		a, err := la.Acquire(t.Context(), key, &distlock.Options{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lb.TryAcquire(t.Context(), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire while held = %v", err)
		}
		terminate(t, a)
		select {
		case <-a.Context().Done():
		case <-time.After(30 * time.Second):
			t.Fatal("lease context not cancelled after pg_terminate_backend")
		}
		if c := context.Cause(a.Context()); !errors.Is(c, distlock.ErrLeaseLost) {
			t.Fatalf("cause = %v", c)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		b, err := lb.Acquire(ctx, key, nil)
		if err != nil {
			t.Fatalf("Acquire after the holder's session was terminated: %v", err)
		}
		if b.Token() <= a.Token() {
			t.Fatalf("token %d after %d", b.Token(), a.Token())
		}
		if err := a.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("Release of the terminated lease = %v", err)
		}
		if err := b.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}()
}

// TestIdleSessionTimeout: a holder that does not extend loses its session
// on the server at the TTL (idle_session_timeout), so the next waiter gets
// the lock; with AutoExtend it keeps it.
func TestIdleSessionTimeout(t *testing.T) {
	la, lb := newLocker(t), newLocker(t)
	key := locktest.Key(t)
	a, err := la.Acquire(t.Context(), key, &distlock.Options{TTL: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := lb.Acquire(ctx, key, &distlock.Options{TTL: 300 * time.Millisecond, AutoExtend: true})
	if err != nil {
		t.Fatalf("Acquire after the idle holder's TTL: %v", err)
	}
	t.Cleanup(func() { _ = b.Release(context.Background()) }) // before the pool closes
	<-a.Context().Done()
	time.Sleep(time.Second) // > 3 TTLs of b
	if err := b.Context().Err(); err != nil {
		t.Fatalf("auto-extended lease lost: %v", context.Cause(b.Context()))
	}
	if _, err := la.TryAcquire(t.Context(), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire = %v", err)
	}
	_ = a.Release(t.Context())
	if err := b.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestConnectionReuse: released connections go back to the pool without
// the lease's idle timeout and without a lock.
func TestConnectionReuse(t *testing.T) {
	p, err := pgxpool.New(t.Context(), pgURL(t)+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := postgres.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		lz, err := l.TryAcquire(t.Context(), locktest.Key(t), &distlock.Options{TTL: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := lz.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	var timeout string
	var locks int
	if err := p.QueryRow(t.Context(), "SELECT current_setting('idle_session_timeout'), (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())").Scan(&timeout, &locks); err != nil {
		t.Fatal(err)
	}
	if timeout != "0" || locks != 0 {
		t.Fatalf("pooled connection has idle_session_timeout=%s and %d advisory locks", timeout, locks)
	}
	time.Sleep(300 * time.Millisecond) // the old TTL would have killed it by now
	if err := p.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestNewBadInput(t *testing.T) {
	if _, err := postgres.New(nil, nil); !errors.Is(err, postgres.ErrNilPool) {
		t.Fatalf("New(nil) = %v", err)
	}
	if _, err := postgres.New(pool(t), &postgres.Options{Sequence: "a\x00"}); !errors.Is(err, distlock.ErrInvalidOptions) {
		t.Fatalf("bad sequence name: %v", err)
	}
}
