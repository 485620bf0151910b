package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/testkit"
	"strings"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newLocker(t *testing.T) distlock.Locker {
	t.Helper()
	l, err := pglock.New(pool(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func TestConformance(t *testing.T) {
	distlocktest.Run(t, newLocker, distlocktest.Options{})
}

// terminate ends the holder's server session, as a crash, a partition
// detected by the server or an operator would.
func terminate(t *testing.T, l distlock.Lease) {
	t.Helper()
	pid, isPG := pglock.BackendPID(l)
	if !isPG {
		t.Fatalf("BackendPID of a pglock lease: not a pglock lease")
	}
	var ok bool
	if err := pool(t).QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend: %v, %v", ok, err)
	}
	// The server frees the lock as the backend exits, and the holder learns
	// of it from its dead connection a moment later: a successor may
	// acquire first. The suite checks that the holder's lease ends within
	// terminated.LossBound of that.
}

// terminated runs the suite's handover checks with the holder's session
// terminated by the server instead of a pause: the lock is free at once,
// and the holder's lease must end within the package's documented bound
// (pglock.SessionLossBound). ShortTTL is far longer than the bound, so
// that only the session watcher, not the lease's own deadline, can end it
// in time.
var terminated = distlocktest.Options{Expire: terminate, ShortTTL: 10 * time.Second, LossBound: pglock.SessionLossBound}

// TestKleppmannTerminated: the pause maps to the holder's session dying
// (terminated while the holder is paused).
func TestKleppmannTerminated(t *testing.T) {
	distlocktest.Kleppmann(t, newLocker, terminated)
}

func TestReleaseTerminatedKeepsSuccessor(t *testing.T) {
	distlocktest.ReleaseExpiredKeepsSuccessor(t, newLocker, terminated)
}

func TestHandoverTerminated(t *testing.T) {
	distlocktest.HandoverAfterLocalExpiry(t, newLocker, terminated)
}

// TestTerminateBackendCancelsLease: pg_terminate_backend of the holder's
// session cancels its lease context at once (no polling interval to wait
// for) and frees the lock for another locker.
func TestTerminateBackendCancelsLease(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after the pools close
	func() {
		la, lb := newLocker(t), newLocker(t)
		key := distlocktest.Key(t)
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
	key := distlocktest.Key(t)
	a, err := la.Acquire(t.Context(), key, &distlock.Options{TTL: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// b auto-extends: the test counts its successful extensions (through
	// the hooks) rather than sleeping, so that a loaded machine makes it
	// slower, not red.
	extended := make(chan struct{}, 64)
	hooks := &observe.Hooks{LeaseExtend: func(_ context.Context, e observe.LeaseEvent) {
		if e.Err == nil {
			select {
			case extended <- struct{}{}:
			default:
			}
		}
	}}
	ctx, cancel := context.WithTimeout(observe.WithHooks(t.Context(), hooks), 30*time.Second)
	defer cancel()
	const ttl = time.Second
	b, err := lb.Acquire(ctx, key, &distlock.Options{TTL: ttl, AutoExtend: true})
	if err != nil {
		t.Fatalf("Acquire after the idle holder's TTL: %v", err)
	}
	t.Cleanup(func() { _ = b.Release(context.Background()) }) // before the pool closes
	<-a.Context().Done()
	for i := range 4 { // 4 renewals: > 1 TTL past the acquisition
		select {
		case <-extended:
		case <-b.Context().Done():
			t.Fatalf("auto-extended lease lost after %d renewals: %v", i, context.Cause(b.Context()))
		case <-time.After(time.Minute):
			t.Fatalf("only %d renewals in a minute", i)
		}
	}
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
	l, err := pglock.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		lz, err := l.TryAcquire(t.Context(), distlocktest.Key(t), &distlock.Options{TTL: 200 * time.Millisecond})
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

// TestRestoresIdleTimeout: Release puts back the session's own
// idle_session_timeout (here one the application SET on the connection),
// read by the acquiring statement itself, rather than the server default
// from pg_settings (a view that costs the server ~1 ms per unlock).
func TestRestoresIdleTimeout(t *testing.T) {
	p, err := pgxpool.New(t.Context(), pgURL(t)+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Exec(t.Context(), "SET idle_session_timeout = '1h'"); err != nil {
		t.Fatal(err)
	}
	l, err := pglock.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	lz, err := l.Acquire(t.Context(), distlocktest.Key(t), &distlock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := lz.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	var timeout string
	if err := p.QueryRow(t.Context(), "SELECT current_setting('idle_session_timeout')").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "1h" {
		t.Fatalf("idle_session_timeout after Release = %q, want the connection's own 1h", timeout)
	}
}

func TestNewBadInput(t *testing.T) {
	if _, err := pglock.New(nil, nil); !errors.Is(err, concurkit.ErrInvalidArgument) || !strings.Contains(err.Error(), "pglock: nil pool") {
		t.Fatalf("New(nil) = %v", err)
	}
	for _, cfg := range []*pglock.Config{{Sequence: "a\x00"}, {PollMin: -1}, {PollMax: -1}, {CleanupTimeout: -1}} {
		if _, err := pglock.New(pool(t), cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Fatalf("New(%+v) = %v", cfg, err)
		}
	}
}

// TestNilHandles: one nil policy — a nil or typed-nil pool, or a nil or
// zero Locker, is a bad-input error (matching concurkit.ErrInvalidArgument)
// before any I/O, never a panic.
func TestNilHandles(t *testing.T) {
	var nilPool *pgxpool.Pool
	var nilLocker *pglock.Locker
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"New(nil)", func() error { _, err := pglock.New(nil, nil); return err }},
		{"New(typed nil *pgxpool.Pool)", func() error { _, err := pglock.New(nilPool, nil); return err }},
		{"New(typed nil *pgxpool.Pool, empty Config)", func() error {
			_, err := pglock.New(nilPool, &pglock.Config{})
			return err
		}},
		{"nil Locker Acquire", func() error { _, err := nilLocker.Acquire(ctx, "k", nil); return err }},
		{"nil Locker TryAcquire", func() error { _, err := nilLocker.TryAcquire(ctx, "k", nil); return err }},
		{"nil Locker CreateSequence", func() error { return nilLocker.CreateSequence(ctx) }},
		{"zero Locker Acquire", func() error { _, err := new(pglock.Locker).Acquire(ctx, "k", nil); return err }},
		{"zero Locker TryAcquire", func() error { _, err := new(pglock.Locker).TryAcquire(ctx, "k", nil); return err }},
		{"zero Locker CreateSequence", func() error { return new(pglock.Locker).CreateSequence(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				err = tc.call()
			}()
			if !errors.Is(err, concurkit.ErrInvalidArgument) || !strings.Contains(err.Error(), "pglock: nil pool") {
				t.Fatalf("err = %v, want \"pglock: nil pool\" matching concurkit.ErrInvalidArgument", err)
			}
		})
	}
	if pid, ok := pglock.BackendPID(nil); pid != 0 || ok {
		t.Fatalf("BackendPID(nil) = %d, %v", pid, ok)
	}
	if pid, ok := pglock.BackendPID(distlock.Lease(nil)); pid != 0 || ok {
		t.Fatalf("BackendPID(nil Lease) = %d, %v", pid, ok)
	}
}

// TestTTLBounds: a TTL the server cannot hold as idle_session_timeout
// (above MaxTTL) is rejected as bad input, at Acquire before any I/O and at
// Extend without losing the lease; MaxTTL itself works.
func TestTTLBounds(t *testing.T) {
	l := newLocker(t)
	ctx := t.Context()
	key := distlocktest.Key(t)
	for _, ttl := range []time.Duration{pglock.MaxTTL + time.Nanosecond, math.MaxInt64} {
		if lz, err := l.Acquire(ctx, key, &distlock.Options{TTL: ttl}); !errors.Is(err, concurkit.ErrInvalidArgument) {
			if lz != nil {
				_ = lz.Release(ctx)
			}
			t.Fatalf("Acquire(TTL %v) = %v, want ErrInvalidArgument", ttl, err)
		}
	}
	lz, err := l.Acquire(ctx, key, &distlock.Options{TTL: pglock.MaxTTL})
	if err != nil {
		t.Fatalf("Acquire(TTL MaxTTL): %v", err)
	}
	defer lz.Release(context.WithoutCancel(ctx))
	if err := lz.Extend(ctx, math.MaxInt64); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("Extend(MaxInt64) = %v, want ErrInvalidArgument", err)
	}
	if err := lz.Context().Err(); err != nil {
		t.Fatalf("lease lost after a rejected Extend: %v", context.Cause(lz.Context()))
	}
	// The bound itself is accepted by Extend too. (A tiny TTL after a huge
	// one is refused by the lease: the configured drift and margin of the
	// MaxTTL lease leave it no validity; rounding is TestMilliseconds'.)
	if err := lz.Extend(ctx, pglock.MaxTTL); err != nil {
		t.Fatalf("Extend(MaxTTL): %v", err)
	}
}

// TestSharedDefaultPool: 16 contenders share the application's pool with
// pgxpool's defaults (pgxpool.New with a plain URL: MaxConns =
// max(4, NumCPU)) and each does real work on that pool while it holds the
// lock. Waiters must not take the connections the holder needs: all 16
// finish, in bounded time, one at a time.
func TestSharedDefaultPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := pgxpool.New(ctx, pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := pglock.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := distlocktest.Key(t)
	const contenders = 16
	var (
		wg     sync.WaitGroup
		inside atomic.Bool
		done   atomic.Int32
		errs   = make(chan error, contenders)
		start  = make(chan struct{})
	)
	for i := range contenders {
		wg.Go(func() {
			<-start
			lz, err := l.Acquire(ctx, key, &distlock.Options{TTL: 30 * time.Second})
			if err != nil {
				errs <- fmt.Errorf("contender %d: Acquire: %w", i, err)
				return
			}
			defer lz.Release(context.WithoutCancel(ctx))
			if !inside.CompareAndSwap(false, true) {
				errs <- fmt.Errorf("contender %d: two holders at once", i)
				return
			}
			defer inside.Store(false)
			// The holder's own work, on the same pool.
			err = pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "SELECT pg_sleep(0.01)")
				return err
			})
			if err != nil {
				errs <- fmt.Errorf("contender %d: work while holding the lock: %w", i, err)
				return
			}
			done.Add(1)
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d of %d contenders done in %v on a pool of MaxConns %d", done.Load(), contenders, time.Since(began), p.Config().MaxConns)
	if done.Load() != contenders {
		t.Fatalf("%d of %d contenders completed", done.Load(), contenders)
	}
}

// TestTokenSequenceExhausted: a token sequence past its MAXVALUE makes
// Acquire fail at once with distlock.ErrTokenExhausted (permanent: never a
// wrapped-around token), without waiting and without keeping the lock.
func TestTokenSequenceExhausted(t *testing.T) {
	p := testkit.Postgres(t) // a fresh schema, first in the search path
	if _, err := p.Exec(t.Context(), `CREATE SEQUENCE tiny_tokens AS bigint MINVALUE 1 MAXVALUE 2`); err != nil {
		t.Fatal(err)
	}
	l, err := pglock.New(p, &pglock.Config{Sequence: "tiny_tokens"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ls, err := l.Acquire(t.Context(), "exhausted", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, acquire := range []func(context.Context, string, *distlock.Options) (distlock.Lease, error){l.Acquire, l.TryAcquire} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		ls, err := acquire(ctx, "exhausted", nil)
		cancel()
		if !errors.Is(err, distlock.ErrTokenExhausted) || errors.Is(err, context.DeadlineExceeded) || ls != nil {
			t.Fatalf("Acquire with the sequence used up = %v, %v; want ErrTokenExhausted at once", ls, err)
		}
	}
	// The failed statement took the advisory lock before nextval failed;
	// pglock unlocked it before closing the session, so the key is free for
	// another sequence at once.
	other, err := pglock.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := other.TryAcquire(t.Context(), "exhausted", nil)
	if err != nil {
		t.Fatalf("TryAcquire after the exhausted attempts: %v (the lock was kept)", err)
	}
	_ = ls.Release(t.Context())
}
