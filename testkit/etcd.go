package testkit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/concurkit/concurkit/internal/redact"
)

var etcdServer = &server{
	name:   "etcd",
	envVar: "CONCURKIT_ETCD_ENDPOINT",
	def:    "http://127.0.0.1:12379",
	addrs:  hostPorts,
}

var etcdClusterServer = &server{
	name:   "etcd cluster",
	envVar: "CONCURKIT_ETCD_CLUSTER",
	def:    "http://127.0.0.1:12479,http://127.0.0.1:12489,http://127.0.0.1:12499",
	addrs:  hostPorts,
}

// Etcd returns a client of the single etcd server and a fresh key prefix
// "/ck_<random>/". Keys under the prefix are deleted and the client closed at
// cleanup.
func Etcd(t testing.TB) (*clientv3.Client, string) {
	t.Helper()
	prefix := "/" + Name("ck_") + "/"
	return EtcdClient(t, splitList(etcdServer.get(t)), prefix), prefix
}

// EtcdCluster returns a client of the 3-member cluster (all endpoints), the
// endpoints, and a fresh key prefix, as Etcd does.
func EtcdCluster(t testing.TB) (*clientv3.Client, []string, string) {
	t.Helper()
	eps := splitList(etcdClusterServer.get(t))
	prefix := "/" + Name("ck_") + "/"
	return EtcdClient(t, eps, prefix), eps, prefix
}

// EtcdClient returns a client for endpoints (URLs or host:port, e.g. the
// Addr of Procs from StartEtcdCluster) with a 5 s dial timeout and no
// logging, closed at cleanup after deleting the keys under prefix (none if
// prefix is empty).
func EtcdClient(t testing.TB, endpoints []string, prefix string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		eps := redact.DSN(strings.Join(endpoints, ","))
		t.Fatalf("testenv: etcd %s: %v", eps, redact.Error(err, endpoints...))
	}
	t.Cleanup(func() {
		defer func() { _ = c.Close() }()
		if prefix == "" {
			return
		}
		ctx, cancel := cleanupContext()
		defer cancel()
		if _, err := c.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			t.Logf("testenv: delete etcd prefix %s: %v", prefix, err)
		}
	})
	return c
}

// WaitEtcdLeader waits (at most 30 s) until every running member of procs
// (from StartEtcdCluster) reports the same leader and that leader is one of
// them, and returns its member ID. Call it after killing or restarting a
// member: a request sent before the election ends can wait ~7 s and fail
// with "etcdserver: request timed out".
func WaitEtcdLeader(t testing.TB, procs []*Proc) uint64 {
	t.Helper()
	var eps []string
	for _, p := range procs {
		if p.Running() {
			eps = append(eps, p.Addr)
		}
	}
	if len(eps) == 0 {
		t.Fatal("testenv: WaitEtcdLeader: no member is running")
	}
	c := EtcdClient(t, eps, "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var last error
	for {
		leader, err := etcdLeader(ctx, c, eps)
		if err == nil {
			return leader
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: no etcd leader among %v: %v", eps, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func etcdLeader(ctx context.Context, c *clientv3.Client, eps []string) (uint64, error) {
	ids := map[uint64]bool{}
	var leader uint64
	for _, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Status(sctx, ep)
		cancel()
		if err != nil {
			return 0, err
		}
		ids[st.Header.MemberId] = true
		if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return 0, fmt.Errorf("%s sees leader %x (others %x)", ep, st.Leader, leader)
		}
		leader = st.Leader
	}
	if !ids[leader] {
		return 0, fmt.Errorf("leader %x is not running", leader)
	}
	return leader, nil
}
