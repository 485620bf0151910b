package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/testkit"
)

// defaultClients returns one client per proc with go-redis's DEFAULT
// options (no ContextTimeoutEnabled, ReadTimeout 3 s, 3 retries): what a
// user who never read the client's docs has. The locker must bound its
// requests itself.
func defaultClients(t testing.TB, procs []*testkit.Proc) []*goredis.Client {
	t.Helper()
	cs := make([]*goredis.Client, len(procs))
	for i, p := range procs {
		cs[i] = goredis.NewClient(&goredis.Options{Addr: p.Addr})
		t.Cleanup(func() { _ = cs[i].Close() })
	}
	return cs
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

// within fails the test if took exceeds limit (a generous bound: several
// times the expected time, so load spikes do not flake it).
func within(t testing.TB, what string, took, limit time.Duration) {
	t.Helper()
	t.Logf("%s took %v", what, took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("%s took %v, want < %v", what, took.Round(time.Millisecond), limit)
	}
}

// TestFrozenMaster freezes (SIGSTOP) one of 5 masters, the common
// production fault: its sockets stay open and it answers nothing. With
// go-redis's default client options (no socket deadline from the
// context) every call must still be bounded by the locker's own per-node
// timeout: a majority answers in milliseconds and decides. A lease held
// across the freeze (and then across a kill of a second master) stays
// exclusive: another locker cannot take it while it is valid.
func TestFrozenMaster(t *testing.T) {
	procs := testkit.StartRedis(t, 5)
	src := &counter{}
	// Default client options; a NodeTimeout above the default 50 ms only
	// so that "Extend with exactly 3 of 5" does not flake under -race on a
	// loaded machine (it needs all three in time; 200 ms was too short
	// under a load average of 18). It costs nothing when the live masters
	// answer: an attempt is decided as soon as a majority did.
	cfg := &redlock.Config{Source: src, NodeTimeout: 500 * time.Millisecond}
	holder, err := redlock.New(defaultClients(t, procs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	other, err := redlock.New(defaultClients(t, procs), cfg) // another process
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	held, err := holder.Acquire(ctx, "held", &distlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	procs[0].Freeze(t)

	t.Run("Acquire TTL 10s", func(t *testing.T) {
		actx, cancel := context.WithTimeout(ctx, 12*time.Second)
		defer cancel()
		start := time.Now()
		ls, err := holder.Acquire(actx, "a10", &distlock.Options{TTL: 10 * time.Second})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Acquire = %v after %v", err, took)
		}
		left := time.Until(deadline(t, ls))
		within(t, "Acquire(TTL 10s), 1 of 5 frozen", took, 2*time.Second)
		t.Logf("validity left %v", left.Round(time.Millisecond))
		if left < 8*time.Second {
			t.Errorf("validity left %v, want ≥ 8s", left)
		}
		start = time.Now()
		err = ls.Release(ctx)
		within(t, "Release, 1 of 5 frozen", time.Since(start), 700*time.Millisecond)
		if err != nil {
			t.Errorf("Release = %v", err)
		}
	})

	t.Run("Acquire TTL 2s", func(t *testing.T) {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		ls, err := holder.Acquire(actx, "a2", &distlock.Options{TTL: 2 * time.Second})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Acquire(TTL 2s) = %v after %v", err, took)
		}
		within(t, "Acquire(TTL 2s), 1 of 5 frozen", took, time.Second)
		if err := ls.Release(ctx); err != nil {
			t.Errorf("Release = %v", err)
		}
	})

	t.Run("TryAcquire and Extend", func(t *testing.T) {
		start := time.Now()
		ls, err := holder.TryAcquire(ctx, "try", &distlock.Options{TTL: 10 * time.Second})
		within(t, "TryAcquire, 1 of 5 frozen", time.Since(start), 700*time.Millisecond)
		if err != nil {
			t.Fatalf("TryAcquire = %v", err)
		}
		start = time.Now()
		err = ls.Extend(ctx, 10*time.Second)
		within(t, "Extend, 1 of 5 frozen", time.Since(start), 700*time.Millisecond)
		if err != nil {
			t.Errorf("Extend = %v", err)
		}
		start = time.Now()
		err = ls.Release(ctx)
		within(t, "Release after TryAcquire, 1 of 5 frozen", time.Since(start), 700*time.Millisecond)
		if err != nil {
			t.Errorf("Release = %v", err)
		}
	})

	// probe checks that another locker cannot take the held key.
	probe := func(t *testing.T) {
		t.Helper()
		start := time.Now()
		if ls, err := other.TryAcquire(ctx, "held", nil); !errors.Is(err, distlock.ErrNotAcquired) {
			if ls != nil {
				_ = ls.Release(ctx)
			}
			t.Fatalf("TryAcquire of the held key = %v, want ErrNotAcquired", err)
		}
		within(t, "TryAcquire of a held key", time.Since(start), 700*time.Millisecond)
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start = time.Now()
		ls, err := other.Acquire(actx, "held", nil)
		if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			if ls != nil {
				_ = ls.Release(ctx)
			}
			t.Fatalf("Acquire of the held key = %v, want ErrNotAcquired + DeadlineExceeded", err)
		}
		within(t, "Acquire(300ms deadline) of a held key", time.Since(start), time.Second)
		if held.Context().Err() != nil {
			t.Fatalf("held lease ended: %v", context.Cause(held.Context()))
		}
	}

	t.Run("held across the freeze", func(t *testing.T) {
		probe(t)
		start := time.Now()
		err := held.Extend(ctx, 10*time.Second)
		within(t, "Extend of the held lease", time.Since(start), 700*time.Millisecond)
		if err != nil {
			t.Fatalf("Extend = %v", err)
		}
		if left := time.Until(deadline(t, held)); left < 8*time.Second {
			t.Errorf("validity after Extend %v, want ≥ 8s", left)
		}
	})

	procs[1].Kill(t) // 1 frozen + 1 dead: 3 of 5, exactly a quorum

	t.Run("held across a kill", func(t *testing.T) {
		probe(t)
		start := time.Now()
		err := held.Extend(ctx, 10*time.Second)
		within(t, "Extend, 1 frozen + 1 dead", time.Since(start), 700*time.Millisecond)
		if err != nil {
			t.Fatalf("Extend = %v", err)
		}
		start = time.Now()
		err = held.Release(ctx)
		within(t, "Release, 1 frozen + 1 dead", time.Since(start), 700*time.Millisecond)
		if err != nil {
			t.Fatalf("Release = %v", err)
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start = time.Now()
		ls, err := other.Acquire(actx, "held", nil)
		if err != nil {
			t.Fatalf("Acquire after Release = %v", err)
		}
		within(t, "Acquire of the released key, 1 frozen + 1 dead", time.Since(start), 2*time.Second)
		if ls.Token() <= held.Token() {
			t.Errorf("token %v after %v", ls.Token(), held.Token())
		}
		_ = ls.Release(ctx)
	})
}

// TestFrozenMasterExclusion runs workers that lock one key in a loop while
// one master is frozen and checks that no two are ever inside together and
// that each is inside only while its lease is valid.
func TestFrozenMasterExclusion(t *testing.T) {
	procs := testkit.StartRedis(t, 5)
	procs[2].Freeze(t)
	src := &counter{}
	ctx, stop := context.WithTimeout(t.Context(), 20*time.Second)
	defer stop()
	var (
		inside     atomic.Bool
		violations atomic.Int64
		sections   atomic.Int64
		maxTok     atomic.Int64
		wg         sync.WaitGroup
	)
	for range 3 {
		l, err := redlock.New(defaultClients(t, procs), &redlock.Config{Source: src}) // a process each
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for ctx.Err() == nil && sections.Load() < 30 {
				ls, err := l.Acquire(ctx, "x", &distlock.Options{TTL: 2 * time.Second})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Acquire: %v", err)
					}
					return
				}
				if !inside.CompareAndSwap(false, true) {
					violations.Add(1)
				}
				if ls.Context().Err() != nil {
					violations.Add(1)
				}
				if prev := maxTok.Swap(int64(ls.Token())); fenced.Token(prev) >= ls.Token() {
					t.Errorf("token %v after %v", ls.Token(), prev)
				}
				time.Sleep(2 * time.Millisecond) // a critical section
				inside.Store(false)
				sections.Add(1)
				if err := ls.Release(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := sections.Load(); n < 30 {
		t.Fatalf("only %d critical sections in 20 s with 1 of 5 masters frozen", n)
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d violations of mutual exclusion", v)
	}
}

// TestFrozenMasterCleanupInBackground: even with clients that honour
// context deadlines (so the per-node timeout always reached the socket),
// a failed TryAcquire and a Release used to wait for the compare-and-delete
// on the frozen master, up to CleanupTimeout (1 s) each. The caller must
// not wait for stragglers.
func TestFrozenMasterCleanupInBackground(t *testing.T) {
	procs := testkit.StartRedis(t, 5)
	clients := func() []*goredis.Client {
		cs := make([]*goredis.Client, len(procs))
		for i, p := range procs {
			cs[i] = goredis.NewClient(&goredis.Options{Addr: p.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = cs[i].Close() })
		}
		return cs
	}
	// NodeTimeout 200 ms, not the default 50 ms: the live masters must
	// answer in time on a loaded machine (under a load average of 15 a
	// TryAcquire got 2 of 4 in 50 ms); the bounds below are still far
	// below CleanupTimeout (1 s), which is what the test is about.
	cfg := &redlock.Config{Source: &counter{}, NodeTimeout: 200 * time.Millisecond}
	a, err := redlock.New(clients(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redlock.New(clients(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	held, err := a.Acquire(ctx, "held", &distlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a.Quiesce() // the lock is on every master, the one about to freeze too
	procs[4].Freeze(t)

	start := time.Now()
	_, err = b.TryAcquire(ctx, "held", nil)
	within(t, "TryAcquire of a held key, 1 of 5 frozen", time.Since(start), 500*time.Millisecond)
	if !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire = %v, want ErrNotAcquired", err)
	}
	start = time.Now()
	err = held.Release(ctx)
	within(t, "Release, 1 of 5 frozen", time.Since(start), 500*time.Millisecond)
	if err != nil {
		t.Fatalf("Release = %v", err)
	}
	start = time.Now()
	ls, err := b.TryAcquire(ctx, "held", nil)
	within(t, "TryAcquire of the released key, 1 of 5 frozen", time.Since(start), 500*time.Millisecond)
	if err != nil {
		t.Fatalf("TryAcquire after Release = %v", err)
	}
	start = time.Now()
	err = ls.Release(ctx)
	within(t, "Release, 1 of 5 frozen", time.Since(start), 500*time.Millisecond)
	if err != nil {
		t.Fatalf("Release = %v", err)
	}
}

// TestAbandonedAcquireCleanedAfterThaw: two of three masters are frozen
// while an Acquire tries and gives up. Its requests stay queued in them;
// the clients give up on them, and a single compare-and-delete per
// master, bounded by CleanupTimeout, cannot reach them either. When they
// thaw after that, the queued SETs run: the locker must still remove
// those locks (each master's straggler keeps cleaning up until the master
// answers), so another holder gets the key long before the 20 s TTL, and
// must never delete that holder's lock.
func TestAbandonedAcquireCleanedAfterThaw(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts goredis.Options
		wait time.Duration // until every request to the frozen masters ended and a delete after it gave up
	}{
		{"ContextTimeoutEnabled", goredis.Options{ContextTimeoutEnabled: true}, redlock.DefaultCleanupTimeout + 500*time.Millisecond},
		// 4 tries of 300 ms, up to 512 ms of backoff between them.
		{"ReadTimeout 300ms", goredis.Options{ReadTimeout: 300 * time.Millisecond}, 4*time.Second + redlock.DefaultCleanupTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			procs := testkit.StartRedis(t, 3)
			clients := func(opts goredis.Options) []*goredis.Client {
				cs := make([]*goredis.Client, len(procs))
				for i, p := range procs {
					o := opts
					o.Addr = p.Addr
					cs[i] = goredis.NewClient(&o)
					t.Cleanup(func() { _ = cs[i].Close() })
				}
				return cs
			}
			src := &counter{}
			l, err := redlock.New(clients(tc.opts), &redlock.Config{Source: src})
			if err != nil {
				t.Fatal(err)
			}
			other, err := redlock.New(clients(goredis.Options{ContextTimeoutEnabled: true}), &redlock.Config{Source: src})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			warm, err := l.Acquire(wctx, "warm-up", nil) // connections, the scripts loaded
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l.Quiesce()

			procs[0].Freeze(t)
			procs[1].Freeze(t)
			actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err = l.Acquire(actx, "k", &distlock.Options{TTL: 20 * time.Second})
			cancel()
			if !errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("Acquire, 2 of 3 masters frozen = %v, want ErrNotAcquired", err)
			}
			// Time passing is the fault: the masters thaw only after a
			// delete bounded by CleanupTimeout would have given up.
			time.Sleep(tc.wait)
			procs[0].Thaw(t)
			procs[1].Thaw(t)

			wctx, wcancel = context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			start := time.Now()
			b, err := other.Acquire(wctx, "k", &distlock.Options{TTL: 30 * time.Second})
			if err != nil {
				t.Fatalf("Acquire after the thaw = %v after %v: the abandoned attempts' locks were left behind", err, time.Since(start).Round(time.Millisecond))
			}
			within(t, "Acquire after the thaw", time.Since(start), 8*time.Second)
			l.Quiesce() // every straggler and cleanup has ended
			if err := b.Extend(ctx, 30*time.Second); err != nil {
				t.Fatalf("the later holder's Extend after the cleanups = %v (a cleanup deleted its lock?)", err)
			}
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
