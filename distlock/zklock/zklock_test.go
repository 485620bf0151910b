package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/testkit"
)

func newLocker(t *testing.T, servers []string, cfg *zklock.Config) *zklock.Locker {
	t.Helper()
	l, err := zklock.New(servers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func TestBadInput(t *testing.T) {
	if _, err := zklock.New(nil, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("New(nil servers) = %v, want ErrInvalidArgument", err)
	}
	for _, root := range []string{"relative", "/trailing/", "/a//b", "/a/../b"} {
		if _, err := zklock.New([]string{"127.0.0.1:1"}, &zklock.Config{Root: root}); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(root %q) = %v, want ErrInvalidArgument", root, err)
		}
	}
	// Validation happens before any connection: no server needed.
	l := newLocker(t, []string{"127.0.0.1:1"}, nil)
	cases := []struct {
		name string
		key  string
		opts *distlock.Options
		want error
	}{
		{"empty key", "", nil, distlock.ErrInvalidKey},
		{"dot key", ".", nil, distlock.ErrInvalidKey},
		{"dotdot key", "..", nil, distlock.ErrInvalidKey},
		{"negative ttl", "k", &distlock.Options{TTL: -time.Second}, concurkit.ErrInvalidArgument},
	}
	for _, tc := range cases {
		if _, err := l.Acquire(t.Context(), tc.key, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("Acquire %s: %v, want %v", tc.name, err, tc.want)
		}
		if _, err := l.TryAcquire(t.Context(), tc.key, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("TryAcquire %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	_ = l.Close(context.Background())
	if _, err := l.Acquire(t.Context(), "k", nil); !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
}

// TestKeysAreEscaped: keys that are prefixes of each other or contain '/'
// are distinct locks.
func TestKeysAreEscaped(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	l := newLocker(t, servers, &zklock.Config{Root: root})
	var leases []distlock.Lease
	for _, key := range []string{"a", "a/b", "a%2Fb", "ü", "-lock-0000000001"} {
		ls, err := l.TryAcquire(t.Context(), key, nil)
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", key, err)
		}
		leases = append(leases, ls)
	}
	for _, ls := range leases {
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSessionExpiry: the holder is cut off from ZooKeeper (as a paused or
// partitioned process would be). Its lease context is cancelled as soon as
// it loses the connection; the server expires its session after the
// session timeout (= TTL), deleting its node, and the waiter acquires with
// a higher token. After healing, the old holder starts a new session.
func TestSessionExpiry(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	net := &faultyNet{}
	a := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
	b := newLocker(t, servers, &zklock.Config{Root: root})
	opts := &distlock.Options{TTL: 2 * time.Second}

	la, err := a.Acquire(t.Context(), "order-1", opts)
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
		ls, err := b.Acquire(t.Context(), "order-1", opts)
		got <- result{ls, err, la.Context().Err() != nil}
	}()

	net.partition()
	<-la.Context().Done()
	if cause := context.Cause(la.Context()); !errors.Is(cause, distlock.ErrLeaseLost) {
		t.Fatalf("A's cause = %v, want ErrLeaseLost", cause)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.aLostYet {
		t.Fatal("B acquired while A's lease context was still live")
	}
	if r.ls.Token() <= la.Token() {
		t.Fatalf("B's token %d <= A's %d", r.ls.Token(), la.Token())
	}

	net.heal()
	if err := la.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("A.Release after expiry = %v, want ErrLeaseLost", err)
	}
	if r.ls.Context().Err() != nil {
		t.Fatal("A's release disturbed B's lease")
	}
	if err := r.ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A's locker recovers with a new session.
	la2, err := a.Acquire(t.Context(), "order-1", opts)
	if err != nil {
		t.Fatal(err)
	}
	if la2.Token() <= r.ls.Token() {
		t.Fatalf("A's new token %d <= B's %d", la2.Token(), r.ls.Token())
	}
	if err := la2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestCloseReleases: closing the holder's connection ends its session at
// once; its lease context is cancelled and the waiter acquires.
func TestCloseReleases(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	a := newLocker(t, servers, &zklock.Config{Root: root})
	b := newLocker(t, servers, &zklock.Config{Root: root})
	la, err := a.Acquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan distlock.Lease, 1)
	go func() {
		ls, err := b.Acquire(t.Context(), "k", nil)
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	_ = a.Close(context.Background())
	if err := la.Context().Err(); err == nil {
		t.Fatal("lease context live after Close")
	}
	lb := <-got
	if lb == nil {
		t.FailNow()
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d <= %d", lb.Token(), la.Token())
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestLostCreateResponse: the connection drops right after a lock-node
// create is sent, so the client never learns its outcome. The contender
// finds its protected node by GUID after reconnecting instead of creating a
// second one that would be orphaned.
func TestLostCreateResponse(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	net := &faultyNet{}
	l := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
	warm, err := l.Acquire(t.Context(), "k", nil) // creates the key's parent node
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	net.lockCreates.Store(0)
	net.dropCreate.Store(true)
	ls, err := l.Acquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := net.lockCreates.Load(); n != 1 {
		t.Fatalf("%d lock-node creates, want 1 (the lost one, then found by GUID)", n)
	}
	conn := testkit.ZooKeeperConn(t, servers)
	children, _, err := conn.Children(root + "/k")
	if err != nil || len(children) != 1 {
		t.Fatalf("children = %v, %v; want exactly our node", children, err)
	}
	if err := ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if children, _, _ := conn.Children(root + "/k"); len(children) != 0 {
		t.Fatalf("children after release = %v", children)
	}
}

// TestExtend: Extend checks that the node still exists; deleting the node
// (an operator, or another tool) cancels the lease.
func TestExtendAndNodeDeleted(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	l := newLocker(t, servers, &zklock.Config{Root: root})
	ls, err := l.Acquire(t.Context(), "k", &distlock.Options{AutoExtend: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Extend(t.Context(), time.Second); err != nil {
		t.Fatalf("Extend = %v", err)
	}
	if err := ls.Extend(t.Context(), -time.Second); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("Extend(-1s) = %v", err)
	}
	conn := testkit.ZooKeeperConn(t, servers)
	children, _, err := conn.Children(root + "/k")
	if err != nil || len(children) != 1 {
		t.Fatalf("children = %v, %v", children, err)
	}
	if err := conn.Delete(root+"/k/"+children[0], -1); err != nil {
		t.Fatal(err)
	}
	<-ls.Context().Done()
	if err := ls.Extend(t.Context(), time.Second); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Extend after delete = %v", err)
	}
	if err := ls.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Release after delete = %v", err)
	}
}

// waitChildren waits until the number of lock nodes of key satisfies ok.
func waitChildren(t *testing.T, conn *zk.Conn, dir string, ok func(n int) bool) {
	t.Helper()
	var children []string
	pollZK(t, func() (bool, error) {
		var err error
		children, _, err = conn.Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return ok(0), nil
		}
		return err == nil && ok(len(children)), err
	}, func() string { return fmt.Sprintf("%s: children %v never satisfied the condition", dir, children) })
}

// pollZK asks ZooKeeper until done reports true (every 10 ms, for 30 s at
// most). The test connections poll instead of setting watches: a watch
// registered before go-zookeeper v1.0.4 ran its set-watches step on a new
// connection makes that step read Conn.lastZxid while the receive loop
// writes it (go-zookeeper/zk#35), a data race -race reported once in a
// loaded CI gate. zklock's own connections order the two (session.go).
func pollZK(t *testing.T, done func() (bool, error), fail func() string) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-timeout.C:
			t.Fatal(fail())
		}
	}
}

// TestAbandonedWaitWhileDisconnected: a waiter gives up (ctx cancelled)
// while it cannot reach ZooKeeper, so it cannot delete its node. Its
// session survives the short outage, and so would the node, blocking the
// lock for everybody; the reaper deletes it after reconnecting.
func TestAbandonedWaitWhileDisconnected(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	net := &faultyNet{}
	a := newLocker(t, servers, &zklock.Config{Root: root})
	b := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
	conn := testkit.ZooKeeperConn(t, servers)

	la, err := a.Acquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, "k", nil)
		got <- err
	}()
	waitChildren(t, conn, root+"/k", func(n int) bool { return n == 2 }) // B is waiting
	net.partition()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("B's Acquire = %v, want ErrNotAcquired and context.Canceled", err)
	}
	net.heal()
	waitChildren(t, conn, root+"/k", func(n int) bool { return n == 1 }) // reaped
	if err := la.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	lc, err := a.TryAcquire(t.Context(), "k", nil)
	if err != nil {
		t.Fatalf("TryAcquire after the reaped waiter: %v", err)
	}
	if err := lc.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestSuspendedLeaseGivesUpNode: a holder loses its connection for less
// than the session timeout, so its session (and node) survive. Its lease
// is lost (it cannot know the session survived); the node is deleted after
// reconnecting even though the holder never calls Release, so the waiter
// is not blocked by a lock nobody holds.
func TestSuspendedLeaseGivesUpNode(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	net := &faultyNet{}
	a := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
	b := newLocker(t, servers, &zklock.Config{Root: root})
	conn := testkit.ZooKeeperConn(t, servers)
	opts := &distlock.Options{TTL: 20 * time.Second} // the session outlives the blip

	la, err := a.Acquire(t.Context(), "k", opts)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan distlock.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second) // < the session timeout
		defer cancel()
		ls, err := b.Acquire(ctx, "k", opts)
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	waitChildren(t, conn, root+"/k", func(n int) bool { return n == 2 })
	net.partition()
	<-la.Context().Done()
	net.heal()
	lb := <-got
	if lb == nil {
		t.FailNow()
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d <= %d", lb.Token(), la.Token())
	}
	if err := la.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("A.Release = %v, want ErrLeaseLost", err)
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
