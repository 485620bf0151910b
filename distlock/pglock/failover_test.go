package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/testkit"
)

// TestFailover: a primary dies while a lease is held on it. The lease ends
// (its context, cause ErrLeaseLost) within SessionLossBound; on the
// promoted standby the lock is free at once — advisory locks live in the
// primary's memory, they are not replicated. With a synchronous standby,
// the next token is above every token the old primary handed out: the
// sequence's WAL reached the standby with the commits that waited for it.
// With an asynchronous standby that received nothing for a while, the
// promoted server hands out tokens again that the old primary had already
// given: fencing against that database is void — durabilitypg.Check
// reports such a standby.
func TestFailover(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	for _, sync := range []bool{true, false} {
		t.Run(map[bool]string{true: "sync", false: "async"}[sync], func(t *testing.T) {
			t.Parallel()
			nodes := testkit.StartPostgresReplication(t, sync)
			ctx := t.Context()
			locker := func(url string) *pglock.Locker {
				l, err := pglock.New(testkit.PostgresPoolFor(t, url), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_ = l.Close(cctx)
				})
				return l
			}
			old := locker(nodes[0].URL())
			first, err := old.Acquire(ctx, "failover", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			held, err := old.Acquire(ctx, "held", &distlock.Options{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			nodes[0].FreezeWALSenders(t)
			// Tokens drawn while the standby receives nothing: past the
			// sequence's 32 values logged ahead, so new WAL is needed. A
			// synchronous primary cannot acknowledge them; an
			// asynchronous one does.
			last := held.Token()
			for i := range 40 {
				dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				l, err := old.Acquire(dctx, "failover", &distlock.Options{TTL: time.Minute})
				cancel()
				if err != nil {
					if !sync {
						t.Fatalf("acquire %d on the asynchronous primary: %v", i, err)
					}
					break // the synchronous primary waits for its standby
				}
				last = l.Token()
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			nodes[0].Kill(t)
			select {
			case <-held.Context().Done():
				if c := context.Cause(held.Context()); !errors.Is(c, distlock.ErrLeaseLost) {
					t.Errorf("cause = %v, want ErrLeaseLost", c)
				}
			case <-time.After(pglock.SessionLossBound):
				t.Errorf("the lease outlived its dead server by %s", pglock.SessionLossBound)
			}
			nodes[1].Promote(t)
			// The old primary comes back as the new one's standby: a
			// synchronous primary without one would wait for ever.
			if err := nodes[0].Rejoin(ctx, nodes[1].Addr); err != nil {
				t.Fatal(err)
			}
			successor := locker(nodes[1].URL())
			if h, err := successor.TryAcquire(ctx, "held", nil); err != nil {
				t.Errorf("the lock held on the dead primary, on the new one: %v; want it free", err)
			} else {
				_ = h.Release(ctx)
			}
			next, err := successor.TryAcquire(ctx, "failover", nil)
			if err != nil {
				t.Fatalf("the lock after the failover: %v; want it free", err)
			}
			defer func() { _ = next.Release(ctx) }()
			t.Logf("last token on the old primary %d, first on the new one %d", last, next.Token())
			if sync && next.Token() <= last {
				t.Errorf("synchronous standby: token %d after %d", next.Token(), last)
			}
			if !sync && next.Token() > last {
				t.Errorf("asynchronous standby: token %d after %d — the negative control found no reuse", next.Token(), last)
			}
		})
	}
}
