package zookeeper_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkStandalone is a stand-in for testenv.ZooKeeper until it lands.
func zkStandalone(t testing.TB) ([]string, string) {
	t.Helper()
	addr := os.Getenv("CONCURKIT_ZK_ADDR")
	if addr == "" {
		addr = "127.0.0.1:12181"
	}
	return zkRoot(t, strings.Split(addr, ","))
}

func zkRoot(t testing.TB, servers []string) ([]string, string) {
	t.Helper()
	conn, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	root := fmt.Sprintf("/t%d", time.Now().UnixNano())
	if _, err := conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		conn.Close()
		t.Skipf("zookeeper at %v: %v (run scripts/services.sh up)", servers, err)
	}
	t.Cleanup(func() { deleteTree(conn, root); conn.Close() })
	return servers, root
}

func deleteTree(conn *zk.Conn, path string) {
	children, _, _ := conn.Children(path)
	for _, c := range children {
		deleteTree(conn, path+"/"+c)
	}
	_ = conn.Delete(path, -1)
}
