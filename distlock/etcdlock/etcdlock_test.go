package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/internal/lease"
	"github.com/concurkit/concurkit/testkit"
)

func newLocker(t *testing.T, c *clientv3.Client, prefix string) *etcdlock.Locker {
	t.Helper()
	l, err := etcdlock.New(c, &etcdlock.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return l
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
	l := newLocker(t, c, prefix)
	la, err := l.Acquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ls, err := l.Acquire(t.Context(), "k", nil)
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
