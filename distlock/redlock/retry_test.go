package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/redisnode/redisnodetest"
	"github.com/concurkit/concurkit/distlock/redlock"
)

// proxied returns one client per shared master, each reaching its master
// through a proxy that can lose answers (the first n masters; the others
// directly), the proxies, direct clients for inspection and a key prefix.
func proxied(t *testing.T, n int, opts goredis.Options) ([]*goredis.Client, []*redisnodetest.Proxy, []*goredis.Client, string) {
	t.Helper()
	direct, prefix := redlockEnv(t)
	cs := make([]*goredis.Client, len(direct))
	var ps []*redisnodetest.Proxy
	for i, d := range direct {
		o := opts
		o.Addr = d.Options().Addr
		if i < n {
			p := redisnodetest.NewProxy(t, o.Addr)
			ps = append(ps, p)
			o.Addr = p.Addr
		}
		cs[i] = goredis.NewClient(&o)
		t.Cleanup(func() { _ = cs[i].Close() })
	}
	return cs, ps, direct, prefix
}

// warmUp loads the scripts on every master through l (one acquisition,
// extension and release), so that a call whose answer is lost is an
// EVALSHA that runs, not one answered NOSCRIPT.
func warmUp(t *testing.T, l *redlock.Locker, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ls, err := l.Acquire(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Extend(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l.Quiesce()
}

// lost fails the test unless every proxy lost an answer.
func lost(t *testing.T, ps []*redisnodetest.Proxy) {
	t.Helper()
	for i, p := range ps {
		select {
		case <-p.Lost():
		default:
			t.Fatalf("proxy %d lost no answer: the fault was not injected", i)
		}
	}
}

// TestClientRetryAcquire: every master applies the acquire script but its
// answer is lost; go-redis retries the call on a fresh connection, and
// each retry finds the lock holding the value of this very acquisition.
// That is our lock, not a busy one: the acquisition succeeds, instead of
// failing with the lock left on every master for the TTL.
func TestClientRetryAcquire(t *testing.T) {
	cs, ps, direct, prefix := proxied(t, 5, goredis.Options{ReadTimeout: 200 * time.Millisecond})
	// A NodeTimeout that waits for the client's retry.
	l, err := redlock.New(cs, &redlock.Config{Source: &counter{}, NodeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	warmUp(t, l, prefix+"warm-up")
	ctx := t.Context()
	key := prefix + "k"
	for _, p := range ps {
		p.LoseAnswers(1)
	}
	ls, err := l.TryAcquire(ctx, key, &distlock.Options{TTL: 20 * time.Second})
	lost(t, ps)
	if err != nil {
		l.Quiesce()
		t.Fatalf("TryAcquire whose first answers were lost (the clients retried) = %v; %d of %d masters hold a lock value of that acquisition's token",
			err, holdersAny(t, direct, key), len(direct))
	}
	if n := holders(t, direct, key, ls.Token()); n != len(direct) {
		t.Errorf("%d of %d masters hold the lease's value", n, len(direct))
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
}

// holdersAny counts the masters where key is locked at all.
func holdersAny(t testing.TB, cs []*goredis.Client, key string) int {
	t.Helper()
	n := 0
	for _, c := range cs {
		n += int(c.Exists(context.Background(), redlock.LockKey(key)).Val())
	}
	return n
}

// TestClientRetryStraggler, with go-redis's default options: one master
// applies the acquire script but its answer is lost; the attempt is
// decided by the others, and the lease released before the client's retry
// (after its 5 s ReadTimeout) answers. The retry finds this acquisition's
// own value: the straggler must delete it, not take "busy" for an answer
// and leave the lock on that master for the TTL.
func TestClientRetryStraggler(t *testing.T) {
	cs, ps, direct, prefix := proxied(t, 1, goredis.Options{})
	l, err := redlock.New(cs, &redlock.Config{Source: &counter{}})
	if err != nil {
		t.Fatal(err)
	}
	warmUp(t, l, prefix+"warm-up")
	ctx := t.Context()
	key := prefix + "k"
	ps[0].LoseAnswers(1)
	ls, err := l.Acquire(ctx, key, &distlock.Options{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	l.Quiesce() // the straggler's retry answered, and it cleaned up
	lost(t, ps)
	if v, err := direct[0].Get(ctx, redlock.LockKey(key)).Result(); !errors.Is(err, goredis.Nil) {
		t.Fatalf("after the straggler returned, master 0 still holds %q (PTTL %v), %v", v, direct[0].PTTL(ctx, redlock.LockKey(key)).Val(), err)
	}
}

// TestClientRetryRelease: every master applies the compare-and-delete of
// Release but its answer is lost; go-redis retries, and the retries find
// the key gone, deleted by the first tries. Release must report success,
// not distlock.ErrLeaseLost: nobody acquired the key after this lease.
func TestClientRetryRelease(t *testing.T) {
	cs, ps, _, prefix := proxied(t, 5, goredis.Options{ReadTimeout: 200 * time.Millisecond})
	l, err := redlock.New(cs, &redlock.Config{Source: &counter{}})
	if err != nil {
		t.Fatal(err)
	}
	warmUp(t, l, prefix+"warm-up")
	ctx := t.Context()
	ls, err := l.TryAcquire(ctx, prefix+"k", &distlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		p.LoseAnswers(1)
	}
	err = ls.Release(ctx)
	lost(t, ps)
	if err != nil {
		t.Fatalf("Release whose first answers were lost (the clients retried) = %v, want nil", err)
	}
	l.Quiesce()
}
