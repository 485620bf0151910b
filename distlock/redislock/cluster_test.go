package redislock_test

import (
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/testkit"
)

// clusterKeys are user keys whose encoding is tricky: braces (a hash tag
// of their own, or half of one), the escape character, and keys that
// equal another key plus the old ":fence" suffix.
var clusterKeys = []string{
	"order-42", "order-42:fence", "{order-42}", "{order-42}:fence", "x{", "x}", "}x{", "{}", "{", "}",
	"%", "%7D", "%25", "a}:lock", "ck:{a}:lock", "ünïcode/ключ", "with space\nnewline",
}

// TestCluster takes locks on a real 3-master Redis Cluster with a
// ClusterClient of default options. The acquire script touches the lock
// key and the fence key, which must share a hash slot: with the old key
// layout (key, key+":fence") the script failed with CROSSSLOT for most
// keys.
func TestCluster(t *testing.T) {
	procs := testkit.StartRedisCluster(t, 3)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testkit.Addrs(procs)})
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()

	t.Run("locks", func(t *testing.T) {
		l, err := redislock.New(c, &redislock.Config{Source: &counter{}})
		if err != nil {
			t.Fatal(err)
		}
		opts := &distlock.Options{TTL: 5 * time.Second}
		for _, key := range clusterKeys {
			ls, err := l.Acquire(ctx, key, opts)
			if err != nil {
				t.Fatalf("Acquire(%q) on a cluster: %v", key, err)
			}
			if _, err := l.TryAcquire(ctx, key, opts); !errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("TryAcquire(%q) of a held key = %v", key, err)
			}
			if err := ls.Extend(ctx, 5*time.Second); err != nil {
				t.Fatalf("Extend(%q): %v", key, err)
			}
			if err := ls.Release(ctx); err != nil {
				t.Fatalf("Release(%q): %v", key, err)
			}
		}
	})

	// The cluster itself (CLUSTER KEYSLOT) says that the lock and fence
	// key of each user key share a slot, and that user keys still spread
	// over the slots (the hash tag is the whole user key, not a constant).
	t.Run("slots", func(t *testing.T) {
		slots := map[int64]bool{}
		for _, key := range clusterKeys {
			ls, err := c.ClusterKeySlot(ctx, redislock.LockKey(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			fs, err := c.ClusterKeySlot(ctx, redislock.FenceKey(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ls != fs {
				t.Errorf("%q: lock key %q in slot %d, fence key %q in slot %d", key, redislock.LockKey(key), ls, redislock.FenceKey(key), fs)
			}
			slots[ls] = true
		}
		if len(slots) < len(clusterKeys)/2 {
			t.Errorf("%d user keys in only %d slots", len(clusterKeys), len(slots))
		}
	})
}
