package testkit

import (
	"errors"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

var zkServer = &server{
	name:   "ZooKeeper",
	envVar: "CONCURKIT_ZK_ADDR",
	def:    "127.0.0.1:12181",
	addrs:  hostPorts,
}

var zkEnsembleServer = &server{
	name:   "ZooKeeper ensemble",
	envVar: "CONCURKIT_ZK_ENSEMBLE",
	def:    "127.0.0.1:12182,127.0.0.1:12183,127.0.0.1:12184",
	addrs:  hostPorts,
}

// ZooKeeper returns the standalone server's addresses and a fresh root znode
// "/ck_<random>" (created; deleted recursively at cleanup).
func ZooKeeper(t testing.TB) ([]string, string) {
	t.Helper()
	addrs, _ := hostPorts(zkServer.get(t))
	return addrs, zkRoot(t, addrs)
}

// ZooKeeperEnsemble returns the 3-node ensemble's addresses and a fresh root
// znode, as ZooKeeper does.
func ZooKeeperEnsemble(t testing.TB) ([]string, string) {
	t.Helper()
	addrs, _ := hostPorts(zkEnsembleServer.get(t))
	return addrs, zkRoot(t, addrs)
}

// ZooKeeperConn returns a connection to addrs with an established session
// (timeout 10 s) and no logging, closed at cleanup.
func ZooKeeperConn(t testing.TB, addrs []string) *zk.Conn {
	t.Helper()
	c, err := zkConnect(addrs, 10*time.Second, 30*time.Second)
	if err != nil {
		t.Fatalf("testenv: zookeeper %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

func zkRoot(t testing.TB, addrs []string) string {
	t.Helper()
	root := "/" + Name("ck_")
	c, err := zkConnect(addrs, 10*time.Second, 30*time.Second)
	if err != nil {
		t.Fatalf("testenv: zookeeper %v: %v", addrs, err)
	}
	defer c.Close()
	if _, err := c.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("testenv: create znode %s: %v", root, err)
	}
	t.Cleanup(func() {
		c, err := zkConnect(addrs, 10*time.Second, 30*time.Second)
		if err != nil {
			t.Logf("testenv: delete znode %s: %v", root, err)
			return
		}
		defer c.Close()
		if err := zkDeleteAll(c, root); err != nil {
			t.Logf("testenv: delete znode %s: %v", root, err)
		}
	})
	return root
}

// zkConnect connects and waits (at most wait) until the session is
// established, so that the first request does not queue forever.
func zkConnect(addrs []string, session, wait time.Duration) (*zk.Conn, error) {
	c, events, err := zk.Connect(addrs, session, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				c.Close()
				return nil, errors.New("zookeeper connection closed")
			}
			if e.State == zk.StateHasSession {
				return c, nil
			}
		case <-timer.C:
			c.Close()
			return nil, fmt.Errorf("no zookeeper session after %v", wait)
		}
	}
}

// zkDeleteAll deletes p and everything below it (depth first). Nodes that
// vanish meanwhile (ephemeral nodes of closed sessions) are fine.
func zkDeleteAll(c *zk.Conn, p string) error {
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := zkDeleteAll(c, path.Join(p, ch)); err != nil {
			return err
		}
	}
	err = c.Delete(p, -1)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if errors.Is(err, zk.ErrNotEmpty) { // a child was created meanwhile
		return zkDeleteAll(c, p)
	}
	return err
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
