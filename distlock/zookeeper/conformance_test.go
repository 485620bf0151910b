package zookeeper_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zookeeper"
	"github.com/concurkit/concurkit/internal/locktest"
	"github.com/concurkit/concurkit/internal/testenv"
)

// trackingLocker remembers which faultyNet each of its leases runs over,
// so the suite's Expire can cut exactly that holder off.
type trackingLocker struct {
	*zookeeper.Locker
	net    *faultyNet
	leases *sync.Map // distlock.Lease → *faultyNet
}

func (l trackingLocker) Acquire(ctx context.Context, key string, o *distlock.Options) (distlock.Lease, error) {
	ls, err := l.Locker.Acquire(ctx, key, o)
	if err == nil {
		l.leases.Store(ls, l.net)
	}
	return ls, err
}

func (l trackingLocker) TryAcquire(ctx context.Context, key string, o *distlock.Options) (distlock.Lease, error) {
	ls, err := l.Locker.TryAcquire(ctx, key, o)
	if err == nil {
		l.leases.Store(ls, l.net)
	}
	return ls, err
}

// suite runs the shared conformance suite against servers (standalone or
// ensemble). Expire partitions the holder's connections until the server
// has expired its session (its lock node is gone), as a paused process
// would be; each Locker has its own session, as another process would.
func suite(t *testing.T, servers []string, root string) {
	var leases sync.Map
	const shortTTL = 2 * time.Second // session timeout; the server's minimum is 2 × tickTime
	newLocker := func(t *testing.T) distlock.Locker {
		net := &faultyNet{}
		l := newLocker(t, servers, &zookeeper.Config{Root: root, Dialer: net.Dial})
		return trackingLocker{Locker: l, net: net, leases: &leases}
	}
	expire := func(t *testing.T, ls distlock.Lease) {
		t.Helper()
		v, ok := leases.Load(ls)
		if !ok {
			t.Fatal("lease of an unknown locker")
		}
		net := v.(*faultyNet)
		conn := testenv.ZooKeeperConn(t, servers)
		net.partition()
		<-ls.Context().Done() // the holder notices at once that it is cut off
		waitChildren(t, conn, root+"/"+url.PathEscape(ls.Key()), func(n int) bool { return n == 0 })
		net.heal()
	}
	locktest.Run(t, newLocker, locktest.Options{
		ShortTTL: shortTTL,
		Expire:   expire,
		Store:    func(t *testing.T) locktest.Store { return locktest.PostgresStore(t, testenv.Postgres(t)) },
	})
}

func TestConformance(t *testing.T) {
	servers, root := testenv.ZooKeeper(t)
	suite(t, servers, root)
}

func TestConformanceEnsemble(t *testing.T) {
	servers, root := testenv.ZooKeeperEnsemble(t)
	suite(t, servers, root)
}
