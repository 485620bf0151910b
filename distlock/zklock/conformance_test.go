package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/testkit"
)

// trackingLocker remembers which faultyNet each of its leases runs over,
// so the suite's Expire can cut exactly that holder off.
type trackingLocker struct {
	*zklock.Locker
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

// waitNodeGone waits until the lock node of lease ls (the child of dir
// whose czxid is its token) is gone. Other children (waiters) may come and
// go meanwhile: the suite has successors waiting while a holder expires.
func waitNodeGone(t *testing.T, conn *zk.Conn, dir string, ls distlock.Lease) {
	t.Helper()
	var children []string
	pollZK(t, func() (bool, error) {
		var err error
		children, _, err = conn.Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, c := range children {
			_, st, err := conn.Exists(dir + "/" + c)
			if err != nil {
				return false, err
			}
			if st != nil && st.Czxid == int64(ls.Token()) {
				return false, nil
			}
		}
		return true, nil
	}, func() string {
		return fmt.Sprintf("%s: the lock node of token %d (children %v) was not deleted", dir, ls.Token(), children)
	})
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
		l := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
		return trackingLocker{Locker: l, net: net, leases: &leases}
	}
	expire := func(t *testing.T, ls distlock.Lease) {
		t.Helper()
		v, ok := leases.Load(ls)
		if !ok {
			t.Fatal("lease of an unknown locker")
		}
		net := v.(*faultyNet)
		conn := testkit.ZooKeeperConn(t, servers)
		net.partition()
		<-ls.Context().Done() // the holder notices at once that it is cut off
		waitNodeGone(t, conn, root+"/"+url.PathEscape(ls.Key()), ls)
		net.heal()
	}
	distlocktest.Run(t, newLocker, distlocktest.Options{
		ShortTTL: shortTTL,
		Expire:   expire,
		Store:    func(t *testing.T) distlocktest.Store { return distlocktest.PostgresStore(t, testkit.Postgres(t)) },
	})
}

func TestConformance(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	suite(t, servers, root)
}

func TestConformanceEnsemble(t *testing.T) {
	servers, root := testkit.ZooKeeperEnsemble(t)
	suite(t, servers, root)
}
