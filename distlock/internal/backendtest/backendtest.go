// Package backendtest opens a Locker of each concurkit lock backend on the
// test servers, for the tests of the recipes built on any Locker
// (election, semaphore, multilock): each recipe runs its suite on every
// backend through the same factory. Test code only.
package backendtest

import (
	"context"
	"errors"
	"net"
	"net/url"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/dynamolock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/testkit"
)

// Backends names every lock backend, in the order tests run them.
var Backends = []string{"etcd", "zookeeper", "postgres", "redis", "redlock", "dynamodb"}

// Options returns the distlocktest.Options that fit backend: its
// ShortTTL and, for ZooKeeper (whose leases live as long as the client's
// session, renewed or not), an Expire that cuts the holder's Locker off
// the servers until its lease ends, as a paused process would be; the
// server then expires the session and frees the lock.
func Options(backend string) distlocktest.Options {
	o := distlocktest.Options{ShortTTL: ShortTTL(backend)}
	if backend == "zookeeper" {
		o.Expire = expireZK
	}
	return o
}

// ShortTTL is the shortest TTL each backend honours (etcd rounds up to
// whole seconds; ZooKeeper's session timeout is at least 2 ticks of 1 s
// on the test servers): tests that let a lease expire use it.
func ShortTTL(backend string) time.Duration {
	switch backend {
	case "etcd", "zookeeper":
		return 2 * time.Second
	}
	return time.Second
}

// New returns a factory of independent Lockers of backend (each with
// clients of its own, as separate processes would have) that share one
// namespace on the servers and, for the backends that take tokens from a
// fenced.Source, one PostgreSQL sequence. Every Locker is closed when the
// test that made it ends.
func New(t *testing.T, backend string) distlocktest.NewLocker {
	t.Helper()
	var open func(t *testing.T) (distlock.Locker, error)
	switch backend {
	case "etcd":
		c, prefix := testkit.Etcd(t)
		eps := c.Endpoints()
		open = func(t *testing.T) (distlock.Locker, error) {
			return etcdlock.New(testkit.EtcdClient(t, eps, ""), &etcdlock.Config{Prefix: prefix})
		}
	case "zookeeper":
		servers, root := testkit.ZooKeeper(t)
		open = func(t *testing.T) (distlock.Locker, error) {
			net := &cuttable{servers: servers, root: root}
			l, err := zklock.New(servers, &zklock.Config{Root: root, Dialer: net.dial})
			if err != nil {
				return nil, err
			}
			return zkLocker{l, net}, nil
		}
	case "postgres":
		url := testkit.PostgresServerURL(t)
		open = func(t *testing.T) (distlock.Locker, error) { return pglock.New(testkit.PostgresPoolFor(t, url), nil) }
	case "redis":
		addr, src := testkit.RedisAddr(t), &sources{}
		open = func(t *testing.T) (distlock.Locker, error) {
			return redislock.New(testkit.RedisClient(t, addr, ""), &redislock.Config{Source: src.get(t), FenceTTL: time.Minute})
		}
	case "redlock":
		addrs, src := testkit.RedlockAddrs(t), &sources{}
		open = func(t *testing.T) (distlock.Locker, error) {
			nodes := make([]*goredis.Client, len(addrs))
			for i, a := range addrs {
				nodes[i] = testkit.RedisClient(t, a, "")
			}
			return redlock.New(nodes, &redlock.Config{Source: src.get(t), FenceTTL: time.Minute})
		}
	case "dynamodb":
		c, prefix := testkit.DynamoDB(t)
		name := prefix + "locks"
		if err := dynamolock.CreateTable(t.Context(), c, name, ""); err != nil {
			t.Fatal(err)
		}
		endpoint := testkit.DynamoDBEndpoint(t)
		open = func(t *testing.T) (distlock.Locker, error) {
			return dynamolock.New(testkit.DynamoDBClient(t, endpoint), &dynamolock.Config{Table: name})
		}
	default:
		t.Fatalf("backendtest: unknown backend %q", backend)
	}
	return func(t *testing.T) distlock.Locker {
		t.Helper()
		l, err := open(t)
		if err != nil {
			t.Fatalf("backendtest: %s locker: %v", backend, err)
		}
		if c, ok := l.(distlock.Closer); ok {
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := c.Close(ctx); err != nil {
					t.Errorf("backendtest: close %s locker: %v", backend, err)
				}
			})
		}
		return l
	}
}

// sources gives the Lockers of one (sub)test one token source, made in
// that test: its pool is closed when the test ends, before the suite's
// goroutine-leak check, not at the end of the parent test.
type sources struct {
	mu  sync.Mutex
	src map[*testing.T]fenced.Source
}

func (s *sources) get(t *testing.T) fenced.Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	if src, ok := s.src[t]; ok {
		return src
	}
	if s.src == nil {
		s.src = map[*testing.T]fenced.Source{}
	}
	src := source(t)
	s.src[t] = src
	t.Cleanup(func() {
		s.mu.Lock()
		delete(s.src, t)
		s.mu.Unlock()
	})
	return src
}

// source returns one token sequence on a fresh schema of the test
// PostgreSQL, shared by the Lockers of a test.
func source(t *testing.T) fenced.Source {
	t.Helper()
	pool := testkit.Postgres(t)
	if err := fencedpg.CreateSequence(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	src, err := fencedpg.NewSequence(pool)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// Each runs fn as a parallel-safe subtest per backend.
func Each(t *testing.T, fn func(t *testing.T, backend string, newLocker distlocktest.NewLocker)) {
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) { fn(t, b, New(t, b)) })
	}
}

// zkLocker is a zklock.Locker whose connections can be cut; it records
// which cuttable each of its leases runs over (in sessions), for
// expireZK.
type zkLocker struct {
	*zklock.Locker
	net *cuttable
}

// sessions maps a ZooKeeper lease to the cuttable of its Locker. Leases
// are unique pointers: the map only grows during a test binary's life.
var sessions sync.Map

func (l zkLocker) Acquire(ctx context.Context, key string, o *distlock.Options) (distlock.Lease, error) {
	ls, err := l.Locker.Acquire(ctx, key, o)
	if err == nil {
		sessions.Store(ls, l.net)
	}
	return ls, err
}

func (l zkLocker) TryAcquire(ctx context.Context, key string, o *distlock.Options) (distlock.Lease, error) {
	ls, err := l.Locker.TryAcquire(ctx, key, o)
	if err == nil {
		sessions.Store(ls, l.net)
	}
	return ls, err
}

// expireZK cuts the holder's Locker off the servers and refuses its new
// connections, as for a paused or partitioned process; waits until the
// holder saw it (its lease context ended) and the server expired its
// session (its lock node is gone); then heals the network.
func expireZK(t *testing.T, l distlock.Lease) {
	t.Helper()
	v, ok := sessions.Load(l)
	if !ok {
		t.Fatal("backendtest: Expire of a lease no zookeeper Locker of backendtest made")
	}
	c := v.(*cuttable)
	conn := testkit.ZooKeeperConn(t, c.servers)
	c.cut(true)
	defer c.cut(false)
	select {
	case <-l.Context().Done():
	case <-time.After(time.Minute):
		t.Fatal("backendtest: a zookeeper lease cut off its servers did not end within a minute")
	}
	dir := path.Join(c.root, url.PathEscape(l.Key()))
	for {
		children, _, changed, err := conn.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("backendtest: children of %s: %v", dir, err)
		}
		held := false
		for _, child := range children {
			_, st, err := conn.Exists(dir + "/" + child)
			if err != nil {
				t.Fatalf("backendtest: %s/%s: %v", dir, child, err)
			}
			held = held || (st != nil && st.Czxid == int64(l.Token()))
		}
		if !held {
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Minute):
			t.Fatalf("backendtest: the lock node of token %d in %s was not deleted within a minute", l.Token(), dir)
		}
	}
}

// cuttable dials TCP connections that cut(true) closes, refusing new ones
// until cut(false).
type cuttable struct {
	servers []string // the ensemble, and the Locker's root: for expireZK
	root    string

	mu      sync.Mutex
	blocked bool
	conns   []net.Conn
}

func (c *cuttable) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocked {
		return nil, errors.New("backendtest: partitioned")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	c.conns = append(c.conns, conn)
	return conn, nil
}

func (c *cuttable) cut(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked = on
	if on {
		for _, conn := range c.conns {
			_ = conn.Close()
		}
		c.conns = nil
	}
}
