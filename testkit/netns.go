package testkit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Netns is a set of Linux network namespaces, one per server, whose
// interfaces sit on one bridge in the test's own namespace: the test's
// clients reach every server, and Partition cuts servers off from one
// another (blackhole routes inside the namespaces, added and removed with
// ip), which a proxy in front of each server cannot do. It needs root and
// iproute2; without them StartNetns skips the test (fails it under CI,
// see Unsupported).
type Netns struct {
	// Hosts are the servers' addresses, one per namespace.
	Hosts []netip.Addr

	names  []string // namespace names
	bridge string

	mu  sync.Mutex
	cut map[[2]int]bool // blackhole routes in place: (from, to)
}

// StartNetns creates n namespaces on a fresh bridge and subnet
// (10.213.x.0/24, the bridge at .254, namespace i at .i+1) and removes
// them at cleanup.
func StartNetns(t testing.TB, n int) *Netns {
	t.Helper()
	if n < 1 || n > 200 {
		t.Fatalf("testkit: StartNetns n = %d", n)
	}
	if os.Geteuid() != 0 {
		Unsupported(t, "network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		Unsupported(t, "network namespaces need iproute2's ip")
	}
	id := strings.ToLower(Name(""))[:6]
	nn := &Netns{bridge: "ckb" + id, cut: map[[2]int]bool{}}
	subnet := 1 + rand.IntN(250)
	t.Cleanup(func() {
		for _, ns := range nn.names {
			_ = ip("netns", "del", ns)
		}
		_ = ip("link", "del", nn.bridge)
	})
	if err := ip("link", "add", nn.bridge, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	steps := [][]string{
		{"addr", "add", fmt.Sprintf("10.213.%d.254/24", subnet), "dev", nn.bridge},
		{"link", "set", nn.bridge, "up"},
	}
	for i := range n {
		ns, veth := "ck"+id+"-"+strconv.Itoa(i+1), "ck"+id+"v"+strconv.Itoa(i+1)
		host := netip.AddrFrom4([4]byte{10, 213, byte(subnet), byte(i + 1)})
		nn.names = append(nn.names, ns)
		nn.Hosts = append(nn.Hosts, host)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", ns, "addr", "add", host.String() + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"link", "set", veth, "master", nn.bridge},
			[]string{"link", "set", veth, "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			t.Fatal(err)
		}
	}
	return nn
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testkit: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Len returns the number of namespaces.
func (nn *Netns) Len() int { return len(nn.names) }

// Exec returns argv run inside namespace i (ip netns exec), for a Proc.
func (nn *Netns) Exec(i int, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", nn.names[i]}, argv...)
}

// Partition cuts the namespaces in group off from all the others, both
// ways; the test's own namespace still reaches every one of them (so
// clients on either side go on talking to their server). A cut that is
// already in place is left as it is.
func (nn *Netns) Partition(group ...int) error {
	in := map[int]bool{}
	for _, g := range group {
		if g < 0 || g >= len(nn.names) {
			return fmt.Errorf("testkit: no namespace %d", g)
		}
		in[g] = true
	}
	nn.mu.Lock()
	defer nn.mu.Unlock()
	for a := range nn.names {
		for b := range nn.names {
			if in[a] == in[b] || nn.cut[[2]int{a, b}] {
				continue
			}
			if err := ip("-n", nn.names[a], "route", "add", "blackhole", nn.Hosts[b].String()+"/32"); err != nil {
				return err
			}
			nn.cut[[2]int{a, b}] = true
		}
	}
	return nil
}

// Heal removes every cut.
func (nn *Netns) Heal() error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var errs []error
	for k := range nn.cut {
		if err := ip("-n", nn.names[k[0]], "route", "del", "blackhole", nn.Hosts[k[1]].String()+"/32"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(nn.cut, k)
	}
	return errors.Join(errs...)
}

// StartEtcdClusterNetns starts an n-member etcd cluster with member i in
// namespace i of nn (client port 2379, peer port 2380 on nn.Hosts[i]),
// waits until every member is healthy, and kills it at cleanup, as
// StartEtcdCluster does. Its timing is a tenth of etcd's defaults'
// (heartbeat 50 ms, election timeout 500 ms): a cut-off leader is replaced
// within a second, and the shortest lease etcd grants is 1 s, not 2 s.
func StartEtcdClusterNetns(t testing.TB, nn *Netns) []*Proc {
	t.Helper()
	bin := binary(t, "CONCURKIT_ETCD", "etcd")
	var initial []string
	for i, h := range nn.Hosts {
		initial = append(initial, fmt.Sprintf("m%d=http://%s:2380", i+1, h))
	}
	token, root := Name("ck-"), t.TempDir()
	procs := make([]*Proc, len(nn.Hosts))
	for i, h := range nn.Hosts {
		name := "m" + strconv.Itoa(i+1)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		client, peer := "http://"+h.String()+":2379", "http://"+h.String()+":2380"
		procs[i] = &Proc{
			Addr: h.String() + ":2379", Name: "etcd-netns-" + strconv.Itoa(i+1),
			argv: nn.Exec(i, bin, "--name", name, "--data-dir", filepath.Join(dir, "data"),
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", token,
				"--initial-cluster-state", "new", "--logger", "zap", "--log-level", "warn",
				"--heartbeat-interval", "50", "--election-timeout", "500"),
			dir: dir, log: filepath.Join(dir, "etcd.log"), ready: etcdReady,
		}
	}
	if err := startReady(context.WithoutCancel(t.Context()), procs); err != nil {
		for _, p := range procs {
			_ = p.kill(0)
		}
		t.Fatal(err)
	}
	killAtCleanup(t, procs)
	return procs
}
