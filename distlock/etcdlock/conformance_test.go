package etcdlock_test

import (
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/testkit"
)

// TestConformance runs the shared suite. Each Locker has its own client
// (as another process would) on one key prefix per test. A paused holder
// is simulated by the suite's default Expire: the holder stops renewing
// and waits until its lease context ends; the server deletes its key when
// the etcd lease (TTL rounded up to whole seconds) runs out.
func TestConformance(t *testing.T) {
	var opts distlocktest.Options // 16 goroutines × 200 sections, as on every backend
	suite(t, func(t testing.TB) (*clientv3.Client, string) { return testkit.Etcd(t) }, opts)
}

// TestConformanceCluster runs the suite against the shared 3-member
// cluster, where every write is a quorum write (the script keeps etcd's
// data on tmpfs, so a slow fsync on a loaded machine does not stall lease
// renewals).
func TestConformanceCluster(t *testing.T) {
	suite(t, func(t testing.TB) (*clientv3.Client, string) {
		c, _, prefix := testkit.EtcdCluster(t)
		return c, prefix
	}, distlocktest.Options{})
}

func suite(t *testing.T, server func(testing.TB) (*clientv3.Client, string), opts distlocktest.Options) {
	var (
		mu       sync.Mutex
		prefixes = map[*testing.T]string{}
	)
	newLocker := func(t *testing.T) distlock.Locker {
		mu.Lock()
		prefix, ok := prefixes[t]
		mu.Unlock()
		var c *clientv3.Client
		if !ok {
			c, prefix = server(t)
			mu.Lock()
			prefixes[t] = prefix
			mu.Unlock()
		} else {
			first, _ := server(t) // another client of the same server(s)
			c = testkit.EtcdClient(t, first.Endpoints(), "")
		}
		l, err := etcdlock.New(c, &etcdlock.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeLocker(t, l) })
		return l
	}
	opts.ShortTTL = time.Second // granted as etcd's minimum lease TTL (2 s by default)
	opts.Store = func(t *testing.T) distlocktest.Store { return distlocktest.PostgresStore(t, testkit.Postgres(t)) }
	distlocktest.Run(t, newLocker, opts)
}
