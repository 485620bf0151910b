package redlock_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/testkit"
)

// TestCluster: the Redlock keys follow the cluster-safe layout of package
// distlock/redis, so a Redis Cluster can serve as a "master" (here the
// only one: quorum 1). With the old layout the acquire script failed with
// CROSSSLOT.
func TestCluster(t *testing.T) {
	procs := testkit.StartRedisCluster(t, 3)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testkit.Addrs(procs)})
	t.Cleanup(func() { _ = c.Close() })
	l, err := redlock.New([]*goredis.ClusterClient{c}, &redlock.Config{Source: &counter{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // the old layout polled forever
	defer cancel()
	for _, key := range []string{"order-42", "order-42:fence", "{order-42}", "}{"} {
		ls, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second})
		if err != nil {
			t.Fatalf("Acquire(%q) on a cluster: %v", key, err)
		}
		if err := ls.Extend(ctx, 5*time.Second); err != nil {
			t.Fatalf("Extend(%q): %v", key, err)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", key, err)
		}
	}
}
