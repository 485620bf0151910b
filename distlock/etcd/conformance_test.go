package etcd_test

import (
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/etcd"
	"github.com/concurkit/concurkit/internal/locktest"
	"github.com/concurkit/concurkit/internal/testenv"
)

// TestConformance runs the shared suite. Each Locker has its own client
// (as another process would) on one key prefix per test. A paused holder
// is simulated by the suite's default Expire: the holder stops renewing
// and waits until its lease context ends; the server deletes its key when
// the etcd lease (TTL rounded up to whole seconds) runs out.
func TestConformance(t *testing.T) {
	var (
		mu       sync.Mutex
		prefixes = map[*testing.T]string{}
	)
	newLocker := func(t *testing.T) distlock.Locker {
		mu.Lock()
		prefix, ok := prefixes[t]
		mu.Unlock()
		var c etcd.Client
		if !ok {
			c, prefix = testenv.Etcd(t)
			mu.Lock()
			prefixes[t] = prefix
			mu.Unlock()
		} else {
			first, _ := testenv.Etcd(t) // another client of the same server
			c = testenv.EtcdClient(t, first.Endpoints(), "")
		}
		l, err := etcd.New(c, &etcd.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	locktest.Run(t, newLocker, locktest.Options{
		ShortTTL: time.Second,
		Store:    func(t *testing.T) locktest.Store { return locktest.PostgresStore(t, testenv.Postgres(t)) },
	})
}
