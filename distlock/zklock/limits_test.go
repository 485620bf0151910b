package zklock_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/testkit"
)

// mntr returns the server's mntr four-letter-word answer as a map.
func mntr(t *testing.T, addr string) map[string]string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("mntr")); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "\t"); ok {
			m[k] = v
		}
	}
	if len(m) == 0 {
		t.Fatalf("mntr on %s answered nothing (4lw whitelist?)", addr)
	}
	return m
}

func mntrInt(t *testing.T, addr, key string) int {
	t.Helper()
	v, err := strconv.Atoi(mntr(t, addr)[key])
	if err != nil {
		t.Fatalf("mntr %s: %v", key, err)
	}
	return v
}

// connections returns the number of client connections of a server, not
// counting the one that asks.
func connections(t *testing.T, addr string) int {
	t.Helper()
	return mntrInt(t, addr, "zk_num_alive_connections") - 1
}

// TestBadInputBeforeIO: keys and options the backend cannot serve are
// rejected before any connection is made (the server does not exist).
func TestBadInputBeforeIO(t *testing.T) {
	var dials sync.Map
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dials.Store(addr, true)
		return nil, errors.New("no server here")
	}
	l := newLocker(t, []string{"127.0.0.1:1"}, &zklock.Config{Dialer: dialer})
	cases := []struct {
		name string
		key  string
		opts *distlock.Options
		want error
	}{
		{"empty key", "", nil, distlock.ErrInvalidKey},
		{"dot", ".", nil, distlock.ErrInvalidKey},
		{"dotdot", "..", nil, distlock.ErrInvalidKey},
		{"invalid UTF-8", "order-\xff", nil, distlock.ErrInvalidKey},
		{"truncated rune", "caf\xc3", nil, distlock.ErrInvalidKey},
		{"too long", strings.Repeat("k", zklock.MaxKeyLen+1), nil, distlock.ErrInvalidKey},
		{"1.1 MB", strings.Repeat("k", 1100<<10), nil, distlock.ErrInvalidKey},
		{"negative ttl", "k", &distlock.Options{TTL: -time.Second}, concurkit.ErrInvalidArgument},
		{"ttl MaxInt64", "k", &distlock.Options{TTL: math.MaxInt64}, concurkit.ErrInvalidArgument},
		{"ttl above MaxTTL", "k", &distlock.Options{TTL: zklock.MaxTTL + time.Millisecond}, concurkit.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			if _, err := l.Acquire(ctx, tc.key, tc.opts); !errors.Is(err, tc.want) {
				t.Errorf("Acquire: %.200v, want %v", err, tc.want)
			}
			if _, err := l.TryAcquire(ctx, tc.key, tc.opts); !errors.Is(err, tc.want) {
				t.Errorf("TryAcquire: %.200v, want %v", err, tc.want)
			}
		})
	}
	dials.Range(func(k, _ any) bool {
		t.Errorf("invalid input dialled %v", k)
		return true
	})

	var nilLogger *log.Logger
	bad := []struct {
		name string
		cfg  *zklock.Config
	}{
		{"typed-nil logger", &zklock.Config{Logger: nilLogger}},
		{"root with NUL", &zklock.Config{Root: "/a\x00b"}},
		{"root with control char", &zklock.Config{Root: "/a\x01b"}},
		{"root not UTF-8", &zklock.Config{Root: "/a\xffb"}},
		{"root in /zookeeper", &zklock.Config{Root: "/zookeeper/locks"}},
		{"negative cleanup timeout", &zklock.Config{CleanupTimeout: -1}},
	}
	for _, tc := range bad {
		if _, err := zklock.New([]string{"127.0.0.1:1"}, tc.cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%s) = %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	root := newLocker(t, []string{"127.0.0.1:1"}, &zklock.Config{Root: "/", Dialer: dialer})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := root.TryAcquire(ctx, "zookeeper", nil); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("key %q under root / = %v, want ErrInvalidKey (the system subtree)", "zookeeper", err)
	}
	// A nil or zero Locker is bad input too, not a panic.
	for name, l := range map[string]*zklock.Locker{"nil": nil, "zero": new(zklock.Locker)} {
		if _, err := l.Acquire(ctx, "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: Acquire = %v", name, err)
		}
		if _, err := l.TryAcquire(ctx, "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: TryAcquire = %v", name, err)
		}
	}
}

// TestLongKeyKeepsOtherLeases: a key whose request the server would refuse
// (over jute.maxbuffer, 1 MB) would make it drop the connection, and with
// it every lease of the session. It is rejected before any I/O.
func TestLongKeyKeepsOtherLeases(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	l := newLocker(t, servers, &zklock.Config{Root: root})
	other, err := l.Acquire(t.Context(), "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err = l.TryAcquire(ctx, strings.Repeat("k", 1100<<10), nil)
	if !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("TryAcquire(1.1 MB key) = %.200v after %v, want ErrInvalidKey", err, time.Since(start))
	}
	if err := other.Context().Err(); err != nil {
		t.Fatalf("an unrelated lease of the same Locker was lost: %v", context.Cause(other.Context()))
	}
	if err := other.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestKeysAreDistinctAtLimits: the longest valid key, multi-byte runes and
// keys that differ only in escaping are distinct locks.
func TestKeysAreDistinctAtLimits(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	l := newLocker(t, servers, &zklock.Config{Root: root})
	var leases []distlock.Lease
	for _, key := range []string{strings.Repeat("k", zklock.MaxKeyLen), strings.Repeat("é", zklock.MaxKeyLen/2),
		"nul\x00byte", "nul%00byte", "%2E", ".a", "a.", "zookeeper", "\u2028", "\uf8ff"} {
		ls, err := l.TryAcquire(t.Context(), key, nil)
		if err != nil {
			t.Fatalf("TryAcquire(%.20q): %v", key, err)
		}
		leases = append(leases, ls)
	}
	for _, ls := range leases {
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoLeftoverWatches: a waiter whose predecessor is deleted between
// listing the children and setting the watch must not leave a watch
// behind (an exists-watch on a node that will never come back stays on the
// server for the session's life). Counted on a private server with mntr.
func TestNoLeftoverWatches(t *testing.T) {
	procs := testkit.StartZooKeeperEnsemble(t, 1)
	servers := testkit.Addrs(procs)
	const root = "/w"
	admin := testkit.ZooKeeperConn(t, servers)
	if _, err := admin.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	net := &faultyNet{}
	a := newLocker(t, servers, &zklock.Config{Root: root})
	b := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
	for i := range 3 {
		la, err := a.Acquire(t.Context(), "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		children, _, err := admin.Children(root + "/k")
		if err != nil || len(children) != 1 {
			t.Fatalf("children %v, %v", children, err)
		}
		pred := []byte(children[0])
		var once sync.Once
		hook := func(op int32, pkt []byte) {
			// B is about to watch A's node: A's node goes first.
			if (op == 3 || op == 4) && bytes.Contains(pkt, pred) { // exists, getData
				once.Do(func() {
					if err := admin.Delete(root+"/k/"+string(pred), -1); err != nil {
						t.Error(err)
					}
				})
			}
		}
		net.beforeWrite.Store(&hook)
		lb, err := b.Acquire(t.Context(), "k", nil)
		net.beforeWrite.Store(nil)
		if err != nil {
			t.Fatal(err)
		}
		<-la.Context().Done() // its node was deleted
		_ = la.Release(t.Context())
		if err := lb.Release(t.Context()); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	// Both sessions are open, nothing is held or awaited: no watch may
	// remain (a released lease's own watch fired with its deletion).
	if n := mntrInt(t, servers[0], "zk_watch_count"); n != 0 {
		t.Fatalf("%d watches left on the server after 3 rounds", n)
	}
}

// TestSessionsBounded: a Locker used with many TTLs keeps one session per
// TTL in use, or the last one when none is in use; a TTL the server
// negotiates to the timeout of an existing session shares it.
func TestSessionsBounded(t *testing.T) {
	procs := testkit.StartZooKeeperEnsemble(t, 1) // tickTime 500 ms: timeouts 1 s to 60 s
	servers := testkit.Addrs(procs)
	const root = "/s"
	admin := testkit.ZooKeeperConn(t, servers)
	if _, err := admin.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	base := connections(t, servers[0]) // the admin connection
	l := newLocker(t, servers, &zklock.Config{Root: root})
	for i, ttl := range []time.Duration{2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second, 6 * time.Second} {
		ls, err := l.Acquire(t.Context(), "k"+strconv.Itoa(i), &distlock.Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	waitConnections(t, servers[0], base+1, "after 5 TTLs used one after the other")

	var held []distlock.Lease
	for i, ttl := range []time.Duration{2 * time.Second, 3 * time.Second, 4 * time.Second} {
		ls, err := l.Acquire(t.Context(), "h"+strconv.Itoa(i), &distlock.Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls)
	}
	waitConnections(t, servers[0], base+3, "while 3 TTLs are held")
	for _, ls := range held {
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	waitConnections(t, servers[0], base+1, "after releasing them")

	// 100 ms is raised to the server's minimum, 1 s: a later 1 s request
	// shares that session.
	short, err := l.Acquire(t.Context(), "short", &distlock.Options{TTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.Acquire(t.Context(), "second", &distlock.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitConnections(t, servers[0], base+1, "1 s and 100 ms (negotiated to 1 s) held")
	_ = short.Release(t.Context())
	_ = second.Release(t.Context())
}

// waitConnections waits (a session close is asynchronous) until the server
// has want client connections besides the one asking.
func waitConnections(t *testing.T, addr string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := connections(t, addr)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d live connections, want %d", what, n, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
