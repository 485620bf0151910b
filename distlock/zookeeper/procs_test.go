package zookeeper_test

// Temporary: private throwaway ZooKeeper ensembles for fault tests, until
// internal/testenv's StartZooKeeperEnsemble lands (then this file goes).

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type proc struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startZooKeeperEnsemble(t testing.TB, n int) []*proc {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java not installed: run scripts/services.sh up")
	}
	base := t.TempDir()
	var servers []string
	procs := make([]*proc, n)
	for i := range n {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, freePort(t), freePort(t)))
	}
	for i := range n {
		dir := filepath.Join(base, fmt.Sprint(i+1))
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		port := freePort(t)
		cfg := fmt.Sprintf("tickTime=500\ninitLimit=20\nsyncLimit=10\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\nforceSync=no\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,stat,mntr\n%s\n",
			dir, port, strings.Join(servers, "\n"))
		if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "myid"), []byte(fmt.Sprint(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		procs[i] = &proc{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	}
	for _, p := range procs {
		p.launch(t)
	}
	for _, p := range procs {
		p.waitReady(t)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.Kill(t)
		}
	})
	return procs
}

func (p *proc) launch(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(p.dir, "zk.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command("java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-nop.jar",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(p.dir, "zoo.cfg"))
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() { p.cmd.Wait(); log.Close(); close(p.done) }()
}

func (p *proc) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := zkMode(p.Addr); m == "leader" || m == "follower" || m == "standalone" {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling a starting server: no event to wait on
	}
	t.Fatalf("zookeeper %s not ready", p.Addr)
}

// Kill sends SIGKILL and waits for the exit.
func (p *proc) Kill(t testing.TB) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// Start restarts the server on the same port.
func (p *proc) Start(t testing.TB) {
	t.Helper()
	p.launch(t)
	p.waitReady(t)
}
