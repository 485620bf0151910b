package testkit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisClusterReadyTimeout bounds how long StartRedisCluster waits for
// redis-cli to create the cluster and for every node to report
// cluster_state:ok.
const RedisClusterReadyTimeout = 60 * time.Second

// StartRedisCluster starts a Redis Cluster of n masters and no replicas
// (n ≥ 3, the least redis-cli --cluster create accepts), each a
// redis-server with --cluster-enabled yes and its own nodes.conf and
// cluster bus port, assigns the 16384 slots with
// `redis-cli --cluster create … --cluster-replicas 0 --cluster-yes` and
// waits until every node reports cluster_state:ok. The processes are
// killed at cleanup; a killed node restarts with its nodes.conf and
// rejoins (its data is gone: no persistence). Connect with a
// *redis.ClusterClient on Addrs(procs). The binaries come from
// CONCURKIT_REDIS_SERVER and CONCURKIT_REDIS_CLI, PATH or /usr/bin; when
// they are missing the test is skipped (failed with CI=true).
func StartRedisCluster(t testing.TB, n int) []*Proc {
	t.Helper()
	if n < 3 {
		t.Fatalf("testenv: StartRedisCluster n = %d, want ≥ 3", n)
	}
	bin := binary(t, "CONCURKIT_REDIS_SERVER", "redis-server")
	cli := binary(t, "CONCURKIT_REDIS_CLI", "redis-cli")
	root := t.TempDir()
	ports := freePorts(t, 2*n) // client port and cluster bus port of each node
	procs := make([]*Proc, n)
	for i := range procs {
		name := "redis-cluster-" + strconv.Itoa(i+1)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		procs[i] = &Proc{
			Addr: addr(ports[2*i]), Name: name,
			argv: []string{bin, "--port", strconv.Itoa(ports[2*i]), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", "",
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				// An explicit bus port: the default, port+10000, may be
				// outside the range freePorts checked.
				"--cluster-port", strconv.Itoa(ports[2*i+1]),
				"--cluster-node-timeout", "5000"},
			dir: dir, log: filepath.Join(dir, "redis.log"), ready: redisReady,
		}
	}
	startAll(t, procs)

	ctx, cancel := context.WithTimeout(t.Context(), RedisClusterReadyTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, Addrs(procs)...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: %s %s: %v\n%s", cli, strings.Join(args, " "), err, out)
	}
	for _, p := range procs {
		if err := waitClusterOK(ctx, p.Addr); err != nil {
			t.Fatalf("testenv: redis cluster node %s (%s) not ready: %v\n%s", p.Name, p.Addr, err, p.LogTail(20))
		}
	}
	return procs
}

// waitClusterOK polls CLUSTER INFO on address until it reports
// cluster_state:ok (every slot served) or ctx ends.
func waitClusterOK(ctx context.Context, address string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = clusterOK(pctx, address)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last probe: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func clusterOK(ctx context.Context, address string) error {
	// The answer is a bulk string "$<len>\r\n<info>\r\n"; its
	// cluster_state line comes first.
	out, err := tcpExchange(ctx, address, "CLUSTER INFO\r\n", func(b []byte) bool {
		i := bytes.Index(b, []byte("cluster_state:"))
		return i >= 0 && bytes.Contains(b[i:], []byte("\r\n"))
	})
	if err != nil {
		return err
	}
	if !bytes.Contains(out, []byte("cluster_state:ok")) {
		return fmt.Errorf("CLUSTER INFO answered %q", lastLine(bytes.SplitN(out, []byte("cluster_slots_assigned"), 2)[0]))
	}
	return nil
}
