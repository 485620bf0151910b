package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/testkit"
)

// within fails the test if took exceeds limit (a generous bound: several
// times the expected time, so load spikes do not flake it).
func within(t testing.TB, what string, took, limit time.Duration) {
	t.Helper()
	t.Logf("%s took %v", what, took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("%s took %v, want < %v", what, took.Round(time.Millisecond), limit)
	}
}

// TestFrozenServer freezes (SIGSTOP) the server, which then keeps its
// sockets open and answers nothing. With go-redis's DEFAULT client options
// (no socket deadline from the context, ReadTimeout 3 s, 3 retries) every
// call must still return by the caller's deadline (Release: by
// Config.CleanupTimeout at the latest), and an Acquire given up on must
// not leave a lock behind once the server thaws. (A Release given up on
// may: its delete is bounded by CleanupTimeout, and a connection to a
// frozen server cannot even be set up in that time; the lock then expires
// by its TTL.)
func TestFrozenServer(t *testing.T) {
	procs := testkit.StartRedis(t, 1)
	c := goredis.NewClient(&goredis.Options{Addr: procs[0].Addr}) // defaults
	t.Cleanup(func() { _ = c.Close() })
	l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	held, err := l.Acquire(ctx, "held", &distlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	procs[0].Freeze(t)

	call := func(what string, limit time.Duration, f func(ctx context.Context) error, want ...error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := f(cctx)
		within(t, what, time.Since(start), limit)
		for _, w := range want {
			if !errors.Is(err, w) {
				t.Errorf("%s = %v, want %v", what, err, w)
			}
		}
		if err == nil {
			t.Errorf("%s = nil with the server frozen", what)
		}
	}
	// The bound tells "returned at the caller's deadline" from "waited for
	// the client's own 3 s ReadTimeout", with room for a loaded machine
	// (a run beside a second race-enabled suite once took 2.98 s for a
	// 300 ms Extend, every call of that run late by the same stall).
	const bound = 2500 * time.Millisecond
	call("Acquire(300ms deadline)", bound, func(ctx context.Context) error {
		_, err := l.Acquire(ctx, "other", nil)
		return err
	}, distlock.ErrNotAcquired, context.DeadlineExceeded)
	call("TryAcquire(300ms deadline)", bound, func(ctx context.Context) error {
		_, err := l.TryAcquire(ctx, "other", nil)
		return err
	}, distlock.ErrNotAcquired, context.DeadlineExceeded)
	call("Extend(300ms deadline)", bound, func(ctx context.Context) error {
		return held.Extend(ctx, 10*time.Second)
	}, context.DeadlineExceeded)
	// Release is bounded by the caller's deadline or CleanupTimeout (1 s).
	call("Release(300ms deadline)", 2*time.Second, func(ctx context.Context) error {
		return held.Release(ctx)
	})

	procs[0].Thaw(t)
	// The abandoned acquire requests run when the server thaws; the
	// locker deletes what they took, so the key is free long before the
	// 10 s TTL.
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	ls, err := l.Acquire(actx, "other", &distlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("Acquire after thaw = %v", err)
	}
	within(t, "Acquire after thaw", time.Since(start), 4*time.Second)
	_ = ls.Release(ctx)
}

// TestFrozenServerOrphanCleaned: an Acquire given up on while the server is
// frozen must not leave its lock behind once the server thaws.
func TestFrozenServerOrphanCleaned(t *testing.T) {
	procs := testkit.StartRedis(t, 1)
	c := goredis.NewClient(&goredis.Options{Addr: procs[0].Addr}) // defaults
	t.Cleanup(func() { _ = c.Close() })
	l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	procs[0].Freeze(t)
	actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	_, err = l.Acquire(actx, "orphan", &distlock.Options{TTL: 20 * time.Second})
	cancel()
	within(t, "Acquire(200ms deadline), server frozen", time.Since(start), time.Second)
	if !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("Acquire = %v, want ErrNotAcquired", err)
	}
	procs[0].Thaw(t) // well within the client's 3 s read timeout
	actx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start = time.Now()
	ls, err := l.Acquire(actx, "orphan", nil)
	if err != nil {
		t.Fatalf("Acquire after thaw = %v (the abandoned request's lock was left behind)", err)
	}
	within(t, "Acquire after thaw", time.Since(start), 4*time.Second)
	_ = ls.Release(ctx)
}

// deadline returns the end of a lease's safe validity.
func deadline(t testing.TB, ls distlock.Lease) time.Time {
	t.Helper()
	d, ok := ls.Deadline()
	if !ok {
		t.Fatalf("%T has no time-based validity", ls)
	}
	return d
}

// TestFrozenServerHeldLease holds a lease across a freeze: while the
// server is frozen nobody gets the key and the holder's Extend fails
// without ending the lease (an uncertain outcome); after the thaw the
// holder still owns the key, renews and releases it, and only then does
// another locker get it.
func TestFrozenServerHeldLease(t *testing.T) {
	procs := testkit.StartRedis(t, 1)
	tokens := &counter{} // shared, as one sequence is by all processes
	newLocker := func() *redislock.Locker {
		c := goredis.NewClient(&goredis.Options{Addr: procs[0].Addr}) // defaults
		t.Cleanup(func() { _ = c.Close() })
		l, err := redislock.New(c, &redislock.Config{Source: tokens})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	holder, other := newLocker(), newLocker()
	ctx := t.Context()
	held, err := holder.Acquire(ctx, "held", &distlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	procs[0].Freeze(t)
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	ls, err := other.TryAcquire(sctx, "held", nil)
	cancel()
	within(t, "TryAcquire(300ms deadline) of the held key, server frozen", time.Since(start), time.Second)
	if err == nil {
		_ = ls.Release(ctx)
		t.Fatal("another locker took the held key")
	}
	sctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	start = time.Now()
	err = held.Extend(sctx, 10*time.Second)
	cancel()
	within(t, "Extend(300ms deadline), server frozen", time.Since(start), time.Second)
	if err == nil || errors.Is(err, distlock.ErrLeaseLost) || held.Context().Err() != nil {
		t.Fatalf("Extend with the server frozen = %v (lease ctx %v), want an uncertain error", err, held.Context().Err())
	}
	procs[0].Thaw(t)

	if ls, err := other.TryAcquire(ctx, "held", nil); !errors.Is(err, distlock.ErrNotAcquired) {
		if ls != nil {
			_ = ls.Release(ctx)
		}
		t.Fatalf("TryAcquire of the held key after thaw = %v, want ErrNotAcquired", err)
	}
	if err := held.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend after thaw = %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release after thaw = %v", err)
	}
	// Acquire, not TryAcquire: other's abandoned TryAcquire may only now
	// reach the thawed server and hold the free key for the moment until
	// its cleanup deletes it.
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ls, err = other.Acquire(actx, "held", nil)
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	if ls.Token() <= held.Token() {
		t.Errorf("token %v after %v", ls.Token(), held.Token())
	}
	_ = ls.Release(ctx)
}

// scriptCalls is a go-redis hook that reports the script calls (EVALSHA,
// EVAL) of one client: when each starts, and when one fails other than
// with NOSCRIPT (go-redis then sends EVAL itself).
type scriptCalls struct {
	started, failed chan struct{}
}

func newScriptCalls() *scriptCalls {
	return &scriptCalls{started: make(chan struct{}, 1000), failed: make(chan struct{}, 1000)}
}

func (h *scriptCalls) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *scriptCalls) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

func (h *scriptCalls) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		name := cmd.Name()
		script := name == "evalsha" || name == "eval"
		if script {
			signal(h.started)
		}
		err := next(ctx, cmd)
		if script && err != nil && !goredis.HasErrorPrefix(err, "NOSCRIPT") {
			signal(h.failed)
		}
		return err
	}
}

// drain forgets the calls reported so far.
func (h *scriptCalls) drain() {
	for _, ch := range []chan struct{}{h.started, h.failed} {
		for len(ch) > 0 {
			<-ch
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// await waits for a value on ch, failing the test after limit.
func await(t testing.TB, what string, ch <-chan struct{}, limit time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(limit):
		t.Fatalf("%s: nothing after %v", what, limit)
	}
}

// frozenClientOptions are go-redis's defaults (no socket deadline from
// the context) and the same with ContextTimeoutEnabled (the context's
// deadline on the socket, its cancellation ignored).
var frozenClientOptions = []struct {
	name string
	opts goredis.Options
}{
	{"default options", goredis.Options{}},
	{"ContextTimeoutEnabled", goredis.Options{ContextTimeoutEnabled: true}},
}

// TestCancelWhileFrozen: a context cancelled (context.WithCancel, long
// before its deadline) ends every call at once against a frozen server,
// whatever the client options. go-redis with ContextTimeoutEnabled puts a
// context's deadline on the socket but never watches its cancellation: a
// request run on the caller's goroutine returned at the deadline (an
// Acquire cancelled at 200 ms after 4 s), and so did an Extend in flight
// that Release must cancel.
func TestCancelWhileFrozen(t *testing.T) {
	for _, tc := range frozenClientOptions {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			procs := testkit.StartRedis(t, 1)
			o := tc.opts
			o.Addr = procs[0].Addr
			c := goredis.NewClient(&o)
			t.Cleanup(func() { _ = c.Close() })
			calls := newScriptCalls()
			c.AddHook(calls)
			l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			held, err := l.Acquire(ctx, "held", &distlock.Options{TTL: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			procs[0].Freeze(t)

			// A deadline far away, a cancellation soon.
			dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
			defer dcancel()
			actx, acancel := context.WithCancel(dctx)
			stop := time.AfterFunc(200*time.Millisecond, acancel)
			start := time.Now()
			_, err = l.Acquire(actx, "other", nil)
			stop.Stop()
			acancel()
			within(t, "Acquire cancelled at 200ms (deadline 10s), server frozen", time.Since(start), 3*time.Second)
			if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
				t.Errorf("Acquire = %v, want ErrNotAcquired and context.Canceled", err)
			}

			// Release cancels an Extend in flight.
			calls.drain()
			extended := make(chan error, 1)
			go func() { extended <- held.Extend(dctx, 30*time.Second) }()
			await(t, "the Extend's request", calls.started, 10*time.Second)
			start = time.Now()
			_ = held.Release(dctx) // unconfirmed: the server is frozen
			select {
			case err := <-extended:
				within(t, "Extend in flight, after Release (server frozen)", time.Since(start), 3*time.Second)
				if !errors.Is(err, distlock.ErrLeaseLost) {
					t.Errorf("Extend cancelled by Release = %v, want ErrLeaseLost", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Extend in flight still running 15 s after Release")
			}
			procs[0].Thaw(t)
			l.Quiesce()
		})
	}
}

// TestAbandonedAcquireCleanedAfterThaw: an Acquire given up on while the
// server is frozen leaves its request queued in the server, and the
// client gives up on it too; a single compare-and-delete, bounded by
// CleanupTimeout, cannot reach the server either. When the server thaws
// after that, the queued SET runs: the locker must still remove the lock
// (it keeps cleaning up until the server answers), so another holder gets
// the key long before its 20 s TTL, and must never delete that holder's
// lock.
func TestAbandonedAcquireCleanedAfterThaw(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       goredis.Options
		deadline   bool // give up by a deadline, else by cancellation
		endsFrozen bool // the client gives up on the request while the server is frozen
	}{
		{"ContextTimeoutEnabled, deadline", goredis.Options{ContextTimeoutEnabled: true}, true, true},
		{"ReadTimeout 300ms, cancel", goredis.Options{ReadTimeout: 300 * time.Millisecond}, false, true},
		{"default options, cancel", goredis.Options{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			procs := testkit.StartRedis(t, 1)
			o := tc.opts
			o.Addr = procs[0].Addr
			c := goredis.NewClient(&o)
			t.Cleanup(func() { _ = c.Close() })
			calls := newScriptCalls()
			c.AddHook(calls)
			src := &counter{}
			l, err := redislock.New(c, &redislock.Config{Source: src})
			if err != nil {
				t.Fatal(err)
			}
			other, err := redislock.New(testkit.RedisClient(t, procs[0].Addr, ""), &redislock.Config{Source: src})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			warm, err := l.TryAcquire(ctx, "warm-up", nil) // a connection, the scripts loaded
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}

			procs[0].Freeze(t)
			calls.drain()
			var actx context.Context
			var cancel context.CancelFunc
			if tc.deadline {
				actx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			} else {
				actx, cancel = context.WithCancel(ctx)
				stop := time.AfterFunc(300*time.Millisecond, cancel)
				defer stop.Stop()
			}
			_, err = l.Acquire(actx, "k", &distlock.Options{TTL: 20 * time.Second})
			cancel()
			if !errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("Acquire, server frozen = %v, want ErrNotAcquired", err)
			}
			if tc.endsFrozen {
				await(t, "the client giving up on the acquire request", calls.failed, 30*time.Second)
			}
			// Time passing is the fault: the server thaws only after a
			// delete bounded by CleanupTimeout would have given up.
			time.Sleep(redislock.DefaultCleanupTimeout + 500*time.Millisecond)
			procs[0].Thaw(t)

			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			start := time.Now()
			b, err := other.Acquire(wctx, "k", &distlock.Options{TTL: 30 * time.Second})
			if err != nil {
				v, _ := c.Get(ctx, redislock.LockKey("k")).Result()
				t.Fatalf("Acquire after the thaw = %v after %v: the key holds %q with PTTL %v (the abandoned acquisition's lock was left behind)",
					err, time.Since(start).Round(time.Millisecond), v, c.PTTL(ctx, redislock.LockKey("k")).Val())
			}
			within(t, "Acquire after the thaw", time.Since(start), 8*time.Second)
			l.Quiesce() // every cleanup has ended
			if err := b.Extend(ctx, 30*time.Second); err != nil {
				t.Fatalf("the later holder's Extend after the cleanups = %v (a cleanup deleted its lock?)", err)
			}
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
