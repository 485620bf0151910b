package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/testkit"
)

// defaultClient is a client with the options the package documents as
// enough: only the endpoints (no dial timeout, no keep-alive).
func defaultClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// timed runs fn and returns its error and duration.
func timed(fn func() error) (error, time.Duration) {
	start := time.Now()
	err := fn()
	return err, time.Since(start)
}

// TestFrozenMember SIGSTOPs one etcd member (the only one, the leader, a
// follower) while leases are held, with Lockers on default clients and
// etcdlock.DefaultRequestTimeout. Every call must return within its context's
// deadline plus slack, or within the request timeout when its context
// has none; no one may acquire a held key while its holder's context is
// live; after thawing, held keys are probed.
func TestFrozenMember(t *testing.T) {
	cases := []struct {
		name    string
		members int
		freeze  string // "only", "leader" or "follower"
	}{
		{"single", 1, "only"},
		{"leader", 3, "leader"},
		{"follower", 3, "follower"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			procs := testkit.StartEtcdCluster(t, tc.members)
			eps := testkit.Addrs(procs)
			a, err := etcdlock.New(defaultClient(t, eps), nil)
			t.Cleanup(func() { closeLocker(t, a) })
			if err != nil {
				t.Fatal(err)
			}
			b, err := etcdlock.New(defaultClient(t, eps), nil)
			t.Cleanup(func() { closeLocker(t, b) })
			if err != nil {
				t.Fatal(err)
			}
			const ttl = 3 * time.Second
			ctx := t.Context()
			// held is kept alive through the fault if etcd can; victim is
			// released during it.
			held, err := a.Acquire(ctx, "held", &distlock.Options{TTL: ttl, AutoExtend: true})
			if err != nil {
				t.Fatal(err)
			}
			victim, err := a.Acquire(ctx, "victim", &distlock.Options{TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			victim2, err := a.Acquire(ctx, "victim2", &distlock.Options{TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			var lostAt time.Time
			lostCh := make(chan struct{})
			go func() {
				<-held.Context().Done()
				lostAt = time.Now()
				close(lostCh)
			}()

			target := 0
			if tc.freeze != "only" {
				leader := leaderOf(ctx, defaultClient(t, eps), eps, -1)
				if leader < 0 {
					t.Fatal("no leader")
				}
				target = leader
				if tc.freeze == "follower" {
					target = (leader + 1) % len(procs)
				}
			}
			procs[target].Freeze(t)
			t.Logf("froze %s (%s)", procs[target].Name, tc.freeze)

			// Every operation at once, each with its own bound.
			const d = 2 * time.Second
			slack := 3 * time.Second
			noDeadline := etcdlock.DefaultRequestTimeout + slack
			type result struct {
				op    string
				err   error
				took  time.Duration
				bound time.Duration
			}
			var (
				mu   sync.Mutex
				wg   sync.WaitGroup
				ops  int
				done = make(chan result, 8)
			)
			run := func(op string, bound time.Duration, fn func() error) {
				ops++
				wg.Go(func() {
					err, took := timed(fn)
					done <- result{op, err, took, bound}
				})
			}
			withTimeout := func(fn func(ctx context.Context) error) func() error {
				return func() error {
					ctx, cancel := context.WithTimeout(context.Background(), d)
					defer cancel()
					return fn(ctx)
				}
			}
			var contested distlock.Lease
			var contestedAt time.Time
			run("TryAcquire(2s)", d+slack, withTimeout(func(ctx context.Context) error {
				ls, err := b.TryAcquire(ctx, "free-1", &distlock.Options{TTL: ttl})
				if err == nil {
					err = ls.Release(ctx)
				}
				return err
			}))
			run("TryAcquire(no deadline)", noDeadline, func() error {
				ls, err := b.TryAcquire(context.Background(), "free-2", &distlock.Options{TTL: ttl})
				if err == nil {
					err = ls.Release(context.Background())
				}
				return err
			})
			run("Acquire held (2s)", d+slack, withTimeout(func(ctx context.Context) error {
				ls, err := b.Acquire(ctx, "held", &distlock.Options{TTL: ttl})
				if err == nil {
					mu.Lock()
					contested, contestedAt = ls, time.Now()
					mu.Unlock()
				}
				return err
			}))
			run("Extend(2s)", d+slack, withTimeout(func(ctx context.Context) error { return held.Extend(ctx, ttl) }))
			// Release's cleanup may run with a context that carries the
			// caller's deadline or none (then the request timeout bounds it).
			run("Release(2s)", noDeadline, withTimeout(func(ctx context.Context) error { return victim.Release(ctx) }))
			run("Release(no deadline)", noDeadline, func() error { return victim2.Release(context.Background()) })
			// Wait for every operation, but no longer than the largest
			// bound: an operation still blocked then fails the test (it
			// returns after the thaw).
			giveUp := time.NewTimer(noDeadline + time.Second)
			frozenAt := time.Now()
		collect:
			for range ops {
				select {
				case r := <-done:
					t.Logf("frozen %s: %-24s %7v  %v", tc.freeze, r.op, r.took.Round(time.Millisecond), r.err)
					if r.took > r.bound {
						t.Errorf("%s took %v with a frozen %s (bound %v)", r.op, r.took.Round(time.Millisecond), tc.freeze, r.bound)
					}
				case <-giveUp.C:
					t.Errorf("operations still blocked %v after freezing the %s", time.Since(frozenAt).Round(time.Millisecond), tc.freeze)
					break collect
				}
			}
			mu.Lock()
			if contested != nil {
				select {
				case <-lostCh:
					if !lostAt.Before(contestedAt) {
						t.Errorf("held key acquired at %v, holder's context ended at %v", contestedAt, lostAt)
					}
				default:
					t.Errorf("held key acquired (token %d) while the holder's context is live (token %d)", contested.Token(), held.Token())
				}
			}
			mu.Unlock()

			procs[target].Thaw(t)
			wg.Wait() // blocked operations return after the thaw
			for len(done) > 0 {
				r := <-done
				t.Logf("after the thaw: %s returned after %v: %v", r.op, r.took.Round(time.Millisecond), r.err)
			}
			testkit.WaitEtcdLeader(t, procs)
			probe(t, b, held, contested)
		})
	}
}

// probe checks a held key after a fault: a lease still live keeps others
// out until released; then (or if it was lost) the key can be acquired
// with a higher token.
func probe(t *testing.T, other *etcdlock.Locker, held, contested distlock.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if contested != nil {
		_ = contested.Release(ctx)
	}
	kept := held.Context().Err() == nil
	if kept {
		ls, err := other.TryAcquire(ctx, held.Key(), nil)
		if held.Context().Err() == nil && !errors.Is(err, distlock.ErrNotAcquired) {
			t.Errorf("TryAcquire of a key held by a live lease = %v, %v", ls, err)
		}
		if ls != nil {
			_ = ls.Release(ctx)
		}
	}
	if err := held.Release(ctx); err != nil && !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Release of the held lease = %v", err)
	}
	next, err := other.Acquire(ctx, held.Key(), nil)
	if err != nil {
		t.Fatalf("Acquire after the fault: %v", err)
	}
	defer next.Release(context.Background())
	if next.Token() <= held.Token() {
		t.Errorf("token %d after the fault <= %d before", next.Token(), held.Token())
	}
	t.Logf("held lease %s through the fault", map[bool]string{true: "kept", false: fmt.Sprintf("lost (%v)", context.Cause(held.Context()))}[kept])
}

// TestAbandonedAcquireAnswerLost: an Acquire whose put reaches etcd and is
// applied, but whose answer never comes back (a proxy holds the replies:
// a partition after the request arrived), returns when its caller gives
// up; the key it left would queue every later contender behind it. The
// Locker deletes it in the background: once that work is done (the test
// waits for it without closing the Locker, whose Close would revoke the
// whole session), another Locker gets the key at once.
func TestAbandonedAcquireAnswerLost(t *testing.T) {
	procs := testkit.StartEtcdCluster(t, 1)
	eps := testkit.Addrs(procs)
	proxy := testkit.StartProxy(t, strings.TrimPrefix(eps[0], "http://"))
	a, err := etcdlock.New(defaultClient(t, []string{"http://" + proxy.Addr}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeLocker(t, a) })
	b, err := etcdlock.New(defaultClient(t, eps), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeLocker(t, b) })
	// Warm up a's session (its etcd lease) so the abandoned request is the
	// lock key's put itself.
	warm, err := a.Acquire(t.Context(), "warm", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	proxy.FreezeReplies()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = a.Acquire(ctx, "k", nil)
	cancel()
	if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		proxy.Thaw()
		t.Fatalf("Acquire without answers = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	proxy.Thaw()
	cctx, ccancel := context.WithTimeout(t.Context(), time.Minute)
	defer ccancel()
	if err := a.Quiesce(cctx); err != nil {
		t.Fatalf("background work still running after a minute: %v", err)
	}
	lz, err := b.TryAcquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatalf("TryAcquire after the abandoned Acquire's cleanup: %v (its key was left in the queue)", err)
	}
	if err := lz.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
