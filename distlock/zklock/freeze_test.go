package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/testkit"
)

// pinnedDialer dials only pin while pinned (so a Locker's session starts
// on a chosen server) and never avoid; it is the default dialer otherwise.
type pinnedDialer struct {
	pin, avoid string
	pinned     atomic.Bool
}

func (p *pinnedDialer) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if (p.pinned.Load() && addr != p.pin) || addr == p.avoid {
		return nil, fmt.Errorf("pinnedDialer: not %s", addr)
	}
	return net.DialTimeout(network, addr, timeout)
}

// TestFrozenServer SIGSTOPs a ZooKeeper server (a standalone one; in an
// ensemble, the follower a holder is connected to) while leases are held,
// with Lockers in their default configuration and a 2 s session timeout.
// Every call must return within its context's deadline plus slack, or
// within a bound derived from the session timeout when its context has
// none; a held key is acquired by another only after its holder's context
// ended; a lease on a server that kept its quorum survives; after thawing,
// held keys are probed.
func TestFrozenServer(t *testing.T) {
	cases := []struct {
		name    string
		servers int
	}{
		{"standalone", 1},
		{"ensemble follower", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			procs := testkit.StartZooKeeperEnsemble(t, tc.servers)
			servers := testkit.Addrs(procs)
			target := 0
			for i, p := range procs {
				if tc.servers > 1 && zkMode(p.Addr) == "follower" {
					target = i
				}
			}
			// A starts on the target server and may move on after the
			// freeze; B never uses it (its lease should survive).
			pa := &pinnedDialer{pin: servers[target]}
			pa.pinned.Store(true)
			pb := &pinnedDialer{}
			if tc.servers > 1 {
				pb.avoid = servers[target]
			}
			a, err := zklock.New(servers, &zklock.Config{Dialer: pa.Dial})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close(context.Background()) })
			b, err := zklock.New(servers, &zklock.Config{Dialer: pb.Dial})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			const ttl = 2 * time.Second
			opts := &distlock.Options{TTL: ttl}
			ctx := t.Context()
			held, err := a.Acquire(ctx, "held", opts)
			if err != nil {
				t.Fatal(err)
			}
			victim, err := a.Acquire(ctx, "victim", opts)
			if err != nil {
				t.Fatal(err)
			}
			victim2, err := a.Acquire(ctx, "victim2", opts)
			if err != nil {
				t.Fatal(err)
			}
			bHeld, err := b.Acquire(ctx, "b-held", opts)
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

			procs[target].Freeze(t)
			pa.pinned.Store(false)
			frozenAt := time.Now()
			t.Logf("froze %s (%s)", procs[target].Name, map[bool]string{true: "follower", false: "standalone"}[tc.servers > 1])

			const d = 2 * time.Second
			slack := 3 * time.Second
			noDeadline := 2*ttl + slack
			type result struct {
				op    string
				err   error
				took  time.Duration
				bound time.Duration
			}
			var (
				mu          sync.Mutex
				wg          sync.WaitGroup
				ops         int
				done        = make(chan result, 8)
				contested   distlock.Lease
				contestedAt time.Time
			)
			run := func(op string, bound time.Duration, fn func() error) {
				ops++
				wg.Go(func() {
					start := time.Now()
					err := fn()
					done <- result{op, err, time.Since(start), bound}
				})
			}
			withTimeout := func(d time.Duration, fn func(ctx context.Context) error) func() error {
				return func() error {
					ctx, cancel := context.WithTimeout(context.Background(), d)
					defer cancel()
					return fn(ctx)
				}
			}
			run("A TryAcquire(2s)", d+slack, withTimeout(d, func(ctx context.Context) error {
				ls, err := a.TryAcquire(ctx, "free-1", opts)
				if err == nil {
					err = ls.Release(ctx)
				}
				return err
			}))
			run("A TryAcquire(no deadline)", noDeadline, func() error {
				ls, err := a.TryAcquire(context.Background(), "free-2", opts)
				if err == nil {
					err = ls.Release(context.Background())
				}
				return err
			})
			run("B Acquire held (4s)", 2*d+slack, withTimeout(2*d, func(ctx context.Context) error {
				ls, err := b.Acquire(ctx, "held", opts)
				if err == nil {
					mu.Lock()
					contested, contestedAt = ls, time.Now()
					mu.Unlock()
				}
				return err
			}))
			run("A Extend(2s)", d+slack, withTimeout(d, func(ctx context.Context) error { return held.Extend(ctx, ttl) }))
			run("A Release(2s)", d+slack, withTimeout(d, func(ctx context.Context) error { return victim.Release(ctx) }))
			run("A Release(no deadline)", noDeadline, func() error { return victim2.Release(context.Background()) })
			giveUp := time.NewTimer(noDeadline + time.Second)
		collect:
			for range ops {
				select {
				case r := <-done:
					t.Logf("%s: %-26s %7v  %v", tc.name, r.op, r.took.Round(time.Millisecond), r.err)
					if r.took > r.bound {
						t.Errorf("%s took %v with a frozen server (bound %v)", r.op, r.took.Round(time.Millisecond), r.bound)
					}
				case <-giveUp.C:
					t.Errorf("operations still blocked %v after the freeze", time.Since(frozenAt).Round(time.Millisecond))
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
			if tc.servers > 1 {
				if err := bHeld.Context().Err(); err != nil {
					t.Errorf("a lease on a server that kept its quorum was lost: %v", context.Cause(bHeld.Context()))
				}
			}

			procs[target].Thaw(t)
			wg.Wait() // operations still blocked return after the thaw
			for len(done) > 0 {
				r := <-done
				t.Logf("after the thaw: %s returned after %v: %v", r.op, r.took.Round(time.Millisecond), r.err)
			}
			probe(t, b, held, contested)
			if err := bHeld.Release(ctx); err != nil && (tc.servers > 1 || !errors.Is(err, distlock.ErrLeaseLost)) {
				t.Errorf("B's release = %v", err)
			}
		})
	}
}

// probe checks a held key after a fault: a lease still live keeps others
// out until released; then (or if it was lost) the key can be acquired
// with a higher token.
func probe(t *testing.T, other distlock.Locker, held, contested distlock.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
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
	next, err := other.Acquire(ctx, held.Key(), &distlock.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatalf("Acquire after the fault: %v", err)
	}
	defer next.Release(context.Background())
	if next.Token() <= held.Token() {
		t.Errorf("token %d after the fault <= %d before", next.Token(), held.Token())
	}
	if kept {
		t.Log("held lease kept through the fault")
	} else {
		t.Logf("held lease lost: %v", context.Cause(held.Context()))
	}
}
