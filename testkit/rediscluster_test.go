package testkit_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/testkit"
)

func TestStartRedisCluster(t *testing.T) {
	t.Parallel()
	procs := testkit.StartRedisCluster(t, 3)
	if len(procs) != 3 {
		t.Fatalf("procs %v", testkit.Addrs(procs))
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testkit.Addrs(procs)})
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_size:3") {
		t.Fatalf("CLUSTER INFO = %q, %v", info, err)
	}
	// Keys spread over every master; a hash tag keeps two keys together.
	masters := map[string]bool{}
	for i := range 30 {
		k := "k" + strconv.Itoa(i)
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if m.Exists(ctx, k).Val() == 1 {
				masters[m.Options().Addr] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(masters) != 3 {
		t.Fatalf("30 keys landed on %d masters, want 3", len(masters))
	}
	if err := c.MSet(ctx, "{tag}a", "1", "{tag}b", "2").Err(); err != nil {
		t.Fatalf("MSET of one hash tag: %v", err)
	}
	if err := c.Do(ctx, "MSET", "order-42", "1", "order-42:fence", "2").Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET across slots = %v, want CROSSSLOT", err)
	}
}
