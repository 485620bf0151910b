package zookeeper_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
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

// pgTable is a stand-in for testenv.Postgres until it lands: a pool and a
// fresh fenced table (id, value, max_seen_token), dropped at cleanup.
func pgTable(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err == nil {
		err = pool.Ping(context.Background())
	}
	if err != nil {
		t.Skipf("postgres: %v (run scripts/services.sh up)", err)
	}
	schema := fmt.Sprintf("zk_fence_%d", time.Now().UnixNano())
	table := schema + ".fence"
	if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+schema+"; CREATE TABLE "+table+" (id bigint PRIMARY KEY, value text NOT NULL DEFAULT '', max_seen_token bigint NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	})
	return pool, schema
}
