package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/testkit"
)

func newLocker(t *testing.T, c *clientv3.Client, prefix string) *etcdlock.Locker {
	t.Helper()
	l, err := etcdlock.New(c, &etcdlock.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeLocker(t, l) })
	return l
}

// closeLocker closes l, waiting for its background cleanups (before the
// client closes and the package's goroutine-leak check runs).
func closeLocker(t *testing.T, l distlock.Closer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestTTLExpiry: a holder that neither extends nor releases loses the
// lease: its context ends at TTL − drift − margin, before the server's lease
// (TTL rounded up) expires; then the waiter acquires with a higher token.
func TestTTLExpiry(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	opts := &distlock.Options{TTL: 1500 * time.Millisecond} // granted as 2 s
	la, err := l.Acquire(t.Context(), "k", opts)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		ls       distlock.Lease
		err      error
		aLostYet bool
	}
	got := make(chan result, 1)
	go func() {
		ls, err := l.Acquire(t.Context(), "k", opts)
		got <- result{ls, err, la.Context().Err() != nil}
	}()
	<-la.Context().Done()
	if cause := context.Cause(la.Context()); !errors.Is(cause, lease.ErrExpired) {
		t.Fatalf("cause = %v, want lease.ErrExpired", cause)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.aLostYet {
		t.Fatal("B acquired while A's context was live")
	}
	if r.ls.Token() <= la.Token() {
		t.Fatalf("B's token %d <= A's %d", r.ls.Token(), la.Token())
	}
	if err := la.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("A.Release = %v, want ErrLeaseLost", err)
	}
	if err := r.ls.Extend(t.Context(), opts.TTL); err != nil {
		t.Fatalf("B.Extend = %v (A's release must not touch B)", err)
	}
	if err := r.ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestWaiterLeaseLost reproduces the shape of etcd#11456 (Jepsen, etcd
// 3.4.3): a waiter's lease is lost while it waits (here: revoked, as an
// expiry during a long pause would). When the holder releases, the wait
// ends; the waiter must not return a lock it does not hold.
func TestWaiterLeaseLost(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	// The waiter has a Locker of its own: the leases of one Locker share
	// a session (etcd lease), and revoking it would end the holder's too.
	l, lw := newLocker(t, c, prefix), newLocker(t, c, prefix)
	la, err := l.Acquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ls, err := lw.Acquire(t.Context(), "k", nil)
		if err == nil {
			ls.Release(context.Background())
		}
		got <- err
	}()
	// Find the waiter's key (the second one) and revoke its lease.
	var waiter int64
	for waiter == 0 {
		resp, err := c.Get(t.Context(), prefix+"k/", append(clientv3.WithLastCreate(), clientv3.WithPrefix())...)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Kvs[0].CreateRevision != int64(la.Token()) {
			waiter = resp.Kvs[0].Lease
		}
	}
	if _, err := c.Revoke(t.Context(), clientv3.LeaseID(waiter)); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("waiter's Acquire = %v, want ErrLeaseLost", err)
	}
}

// TestExtend: Extend renews the lease (moving the context's deadline) and
// refuses a TTL above the granted one (the suite covers AutoExtend).
func TestExtend(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	ls, err := l.Acquire(t.Context(), "k", &distlock.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dl, _ := ls.Deadline()
	if err := ls.Extend(t.Context(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if dl2, _ := ls.Deadline(); !dl2.After(dl) {
		t.Fatalf("deadline %v not moved past %v", dl2, dl)
	}
	if err := ls.Extend(t.Context(), 3*time.Second); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("Extend(3s) on a 2s lease = %v, want ErrInvalidArgument", err)
	}
	if err := ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

}

// TestKeyDeleted: deleting the lock key (an operator, a revoke) cancels the
// lease's context at once.
func TestKeyDeleted(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	ls, err := l.Acquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(t.Context(), prefix+"k/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	<-ls.Context().Done()
	if cause := context.Cause(ls.Context()); !errors.Is(cause, distlock.ErrLeaseLost) {
		t.Fatalf("cause = %v", cause)
	}
	if err := ls.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release = %v", err)
	}
}

// TestSessionReuse: the acquisitions of one Locker with the same TTL put
// their keys on one etcd lease (no grant and revoke per acquisition, as
// concurrency.Mutex on a Session); Release deletes the key, not the lease;
// a lost session ends every lease on it.
func TestSessionReuse(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	leaseOf := func(key string) clientv3.LeaseID {
		t.Helper()
		resp, err := c.Get(t.Context(), prefix+key+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("keys under %s: %v %v", key, resp, err)
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	a, err := l.Acquire(t.Context(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(t.Context(), "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := leaseOf("a")
	if leaseOf("b") != id {
		t.Fatalf("two acquisitions of one Locker on leases %x and %x, want one session", leaseOf("b"), id)
	}
	if err := b.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.TimeToLive(t.Context(), id); err != nil || ttl.TTL <= 0 {
		t.Fatalf("session lease after Release: %v %v, want it alive", ttl, err)
	}
	if err := a.Context().Err(); err != nil {
		t.Fatalf("releasing b ended a: %v", context.Cause(a.Context()))
	}
	// Revoking the session's lease deletes every key on it.
	if _, err := c.Revoke(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease not lost after its session was revoked")
	}
	if err := a.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release after the session was revoked = %v, want ErrLeaseLost", err)
	}
	// The next acquisition finds the session gone and starts another.
	next, err := l.Acquire(t.Context(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if leaseOf("a") == id {
		t.Fatal("new acquisition on the revoked session")
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestKeyNamesReused: a released lease gives its key's name back to the
// session, so a key acquired over and over leaves one index on etcd
// instead of one tombstone per acquisition (each made every later read of
// the key's contenders slower until a compaction); two leases alive at
// once never share a name, and a lost lease's name is not reused.
func TestKeyNamesReused(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	name := func(key string) string {
		t.Helper()
		resp, err := c.Get(t.Context(), prefix+key+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("keys under %s: %v %v", key, resp, err)
		}
		return string(resp.Kvs[0].Key)
	}
	acquire := func(key string) distlock.Lease {
		t.Helper()
		ls, err := l.Acquire(t.Context(), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	release := func(ls distlock.Lease) {
		t.Helper()
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	first := acquire("k")
	firstName, last := name("k"), first.Token()
	release(first)
	for range 5 {
		ls := acquire("k")
		if got := name("k"); got != firstName {
			t.Fatalf("acquisition after a release on %s, want the released name %s", got, firstName)
		}
		if ls.Token() <= last {
			t.Fatalf("token %d after %d: a reused name must still mint a higher token", ls.Token(), last)
		}
		last = ls.Token()
		release(ls)
	}
	// Held at once: distinct names.
	a, b := acquire("k"), acquire("other")
	number := func(s string) string { return s[strings.LastIndex(s, "-")+1:] }
	if name("k") != firstName || number(name("other")) == number(firstName) {
		t.Fatalf("two live leases on one session: %s and %s, want distinct numbers", name("k"), name("other"))
	}
	release(b)
	// A lost lease keeps its name out of use.
	if _, err := c.Delete(t.Context(), prefix+"k/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done()
	if err := a.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release of a lease whose key was deleted = %v", err)
	}
	next := acquire("k")
	if name("k") == firstName {
		t.Fatalf("lost lease's name %s reused", firstName)
	}
	release(next)
}

// TestDeleteOwnGeneration: the cleanup of a lease deletes its own key
// generation only, never a later lease's key of the same name.
func TestDeleteOwnGeneration(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	key := prefix + "gen/x"
	old, err := c.Put(t.Context(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	cur, err := c.Put(t.Context(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := l.DeleteOwn(t.Context(), key, old.Header.Revision); err != nil || ok {
		t.Fatalf("delete of the old generation: %v, %v; want false, nil", ok, err)
	}
	if resp, err := c.Get(t.Context(), key); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("newer generation after a stale delete: %v %v", resp, err)
	}
	if ok, err := l.DeleteOwn(t.Context(), key, cur.Header.Revision); err != nil || !ok {
		t.Fatalf("delete of the current generation: %v, %v; want true, nil", ok, err)
	}
}
