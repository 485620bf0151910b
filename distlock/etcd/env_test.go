package etcd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdSingle is a stand-in for testenv.Etcd until it lands.
func etcdSingle(t testing.TB) (*clientv3.Client, string) {
	t.Helper()
	ep := os.Getenv("CONCURKIT_ETCD_ENDPOINT")
	if ep == "" {
		ep = "http://127.0.0.1:12379"
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(ep, ","), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	prefix := fmt.Sprintf("/t%d/", time.Now().UnixNano())
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), prefix, clientv3.WithPrefix()) })
	return c, prefix
}
