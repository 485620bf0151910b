package testkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/concurkit/concurkit/internal/loopback"
)

// ProcReadyTimeout bounds how long Start waits for a process to serve.
const ProcReadyTimeout = 90 * time.Second

// Proc is a throwaway server process owned by one test: private port, data
// in t.TempDir(), killed at cleanup. Kill and Start may be called any number
// of times; the process always comes back on the same Addr and data dir.
// A Proc's methods are meant to be called from the test goroutine.
type Proc struct {
	// Addr is the host:port clients connect to (for etcd, the client URL's).
	Addr string
	// Name identifies the process in messages, e.g. "redis-1" or "etcd-2".
	Name string

	argv  []string
	env   []string // added to the test's environment
	dir   string
	log   string
	ready func(ctx context.Context, addr string) error

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
}

// Running reports whether the process is alive (started and not yet exited).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits until the process has exited. It is a no-op
// if the process is not running.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	if err := p.kill(10 * time.Second); err != nil {
		t.Fatalf("testenv: kill %s: %v", p.Name, err)
	}
}

func (p *Proc) kill(wait time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("pid %d still running %v after SIGKILL", cmd.Process.Pid, wait)
	}
}

// Stop shuts the process down cleanly — SIGTERM, then it waits (up to
// StopTimeout) until the process has exited — where Kill crashes it. A
// server writes out what it buffered: RabbitMQ 3.10, killed, can lose a
// durable queue declared moments before (3 of 11 kills within milliseconds
// of the declaration on a loaded machine; none of 12 kills 2 s after it),
// and a clean restart after declaring makes the declaration stick. If the process does not exit in time it is killed and
// the test fails. It is a no-op if the process is not running.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if done == nil {
		return
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("testenv: stop %s: %v", p.Name, err)
	}
	select {
	case <-done:
	case <-time.After(StopTimeout):
		err := p.kill(10 * time.Second)
		t.Fatalf("testenv: %s still running %v after SIGTERM (killed: %v)\n%s", p.Name, StopTimeout, err, p.LogTail(40))
	}
}

// StopTimeout bounds how long Stop waits for a clean exit.
const StopTimeout = 60 * time.Second

// Freeze sends SIGSTOP to the process group: the server stays alive, its
// sockets stay open, and it answers nothing, which is what a paused VM, a GC
// pause or a hung disk look like to a client (the common production fault,
// unlike a crash, which resets connections at once). Thaw resumes it; the
// test's cleanup resumes it too, so a failed test never leaves it stopped.
func (p *Proc) Freeze(t testing.TB) {
	t.Helper()
	p.signalGroup(t, syscall.SIGSTOP)
	t.Cleanup(func() { p.signalQuiet(syscall.SIGCONT) })
	// kill(2) returns before the threads stop: on a loaded machine a
	// thread that is running may still answer a request sent right after
	// it. Freeze returns once every thread of the group is stopped.
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for !groupStopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: %s not stopped 10 s after SIGSTOP", p.Name)
		}
		time.Sleep(time.Millisecond)
	}
}

// groupStopped reports whether every thread of every process in process
// group pgid is stopped (state T in /proc/<pid>/task/<tid>/stat).
func groupStopped(pgid int) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true // no procfs: nothing to wait on
	}
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue // exited meanwhile
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				continue
			}
			// pid (comm) state ...: comm may hold spaces and parentheses.
			i := strings.LastIndexByte(string(stat), ')')
			if i < 0 || i+2 >= len(stat) {
				continue
			}
			if st := stat[i+2]; st != 'T' && st != 't' && st != 'Z' && st != 'X' {
				return false
			}
		}
	}
	return true
}

// Thaw sends SIGCONT to the process group, undoing Freeze.
func (p *Proc) Thaw(t testing.TB) {
	t.Helper()
	p.signalGroup(t, syscall.SIGCONT)
}

func (p *Proc) signalGroup(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.signalQuiet(sig); err != nil {
		t.Fatalf("testenv: %v to %s: %v", sig, p.Name, err)
	}
}

func (p *Proc) signalQuiet(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if done == nil {
		return errors.New("not started")
	}
	select {
	case <-done:
		return errors.New("not running")
	default:
	}
	// Setpgid made the process its own group leader: -pid is the group.
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// Pid returns the process's pid, 0 if it was never started.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Signal sends sig to the process group. Unlike Freeze, Thaw and Kill it
// needs no test and waits for nothing, so that a fault injector (package
// chaos) can call it from its own goroutine; it returns an error when the
// process is not running.
func (p *Proc) Signal(sig syscall.Signal) error { return p.signalQuiet(sig) }

// Restart waits for the process to exit (after a SIGKILL sent with
// Signal), starts it again and waits until it serves requests, or until
// ctx ends: Start for a fault injector, which has no test to fail.
func (p *Proc) Restart(ctx context.Context) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("testkit: restart %s: still running: %w", p.Name, ctx.Err())
		}
	}
	if err := p.start(); err != nil {
		return fmt.Errorf("testkit: restart %s: %w", p.Name, err)
	}
	if err := p.waitReady(ctx); err != nil {
		return fmt.Errorf("testkit: restart %s: %w", p.Name, err)
	}
	return nil
}

// Start starts the process again (same port, same data dir) and waits until
// it serves requests (at most ProcReadyTimeout). For etcd and ZooKeeper
// members "serves" needs a quorum: start enough members, or use StartNoWait
// on each and then WaitReady. Start fails the test if the process is running.
func (p *Proc) Start(t testing.TB) {
	t.Helper()
	p.StartNoWait(t)
	p.WaitReady(t)
}

// StartNoWait starts the process without waiting for readiness.
func (p *Proc) StartNoWait(t testing.TB) {
	t.Helper()
	if err := p.start(); err != nil {
		t.Fatalf("testenv: start %s: %v", p.Name, err)
	}
}

func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return errors.New("already running")
		}
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	fmt.Fprintf(logf, "---- testenv: starting %s\n", strings.Join(p.argv, " "))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, and SIGKILL if the test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// WaitReady waits until the process serves requests (at most
// ProcReadyTimeout); it fails the test, printing the log's tail, if the
// process exits or the time is up.
func (p *Proc) WaitReady(t testing.TB) {
	t.Helper()
	if err := p.waitReady(t.Context()); err != nil {
		t.Fatalf("testenv: %s (%s) not ready: %v\n%s", p.Name, p.Addr, err, p.LogTail(40))
	}
}

func (p *Proc) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ProcReadyTimeout)
	defer cancel()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return errors.New("not started")
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = p.ready(pctx, p.Addr)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-done:
			return errors.New("process exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last probe: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// LogTail returns the last n lines of the process's output (all starts).
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startAll starts every proc, waits for all of them, and kills them at cleanup.
func startAll(t testing.TB, procs []*Proc) {
	t.Helper()
	killAtCleanup(t, procs)
	for _, p := range procs {
		p.StartNoWait(t)
	}
	for _, p := range procs {
		p.WaitReady(t)
	}
}

// killAtCleanup kills procs when the test ends.
func killAtCleanup(t testing.TB, procs []*Proc) {
	t.Cleanup(func() {
		for _, p := range procs {
			if err := p.kill(10 * time.Second); err != nil {
				t.Errorf("testenv: cleanup %s: %v", p.Name, err)
			}
		}
	})
}

// startOnFreePorts starts the procs that build makes in a fresh directory
// root on n ports that were free a moment ago, waits until they are ready
// and kills them at cleanup. Another test binary on the machine may bind
// one of those ports before the server does (freePorts cannot hold them
// across processes): when a process exits with its port taken, the procs
// are killed and started again on new ports, three times at most. Any
// other failure fails the test.
func startOnFreePorts(t testing.TB, n int, build func(root string, ports []int) []*Proc) []*Proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		procs := build(t.TempDir(), freePorts(t, n))
		err := startReady(t.Context(), procs)
		if err == nil {
			killAtCleanup(t, procs)
			return procs
		}
		taken := false
		for _, p := range procs {
			_ = p.kill(10 * time.Second)
			if tail := p.LogTail(40); strings.Contains(tail, "Address already in use") ||
				strings.Contains(tail, "address already in use") || strings.Contains(tail, "BindException") {
				taken = true
			}
		}
		if !taken || attempt == 3 {
			t.Fatalf("testenv: %v (attempt %d)", err, attempt)
		}
		t.Logf("testenv: %v: a port was taken by another process; again on new ports", err)
	}
}

// startReady starts procs and waits until each is ready.
func startReady(ctx context.Context, procs []*Proc) error {
	for _, p := range procs {
		if err := p.start(); err != nil {
			return fmt.Errorf("start %s: %w", p.Name, err)
		}
	}
	for _, p := range procs {
		if err := p.waitReady(ctx); err != nil {
			return fmt.Errorf("%s (%s) not ready: %w\n%s", p.Name, p.Addr, err, p.LogTail(40))
		}
	}
	return nil
}

// ---------------------------------------------------------------- binaries

// binary finds an executable: env override, PATH, then /usr/sbin and /usr/bin.
func binary(t testing.TB, envVar, name string) string {
	t.Helper()
	if v := os.Getenv(envVar); v != "" {
		return v
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin"} {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p
		}
	}
	unavailable(t, fmt.Errorf("%s not found (set %s or install it)", name, envVar))
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// ---------------------------------------------------------------- ports

// freePorts returns n distinct ports that were free a moment ago. They are
// taken below the kernel's ephemeral range when possible, so that outgoing
// connections cannot grab a killed server's port before it restarts.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := loopback.FreePorts(n)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ports
}

func addr(port int) string { return loopback.Addr(port) }

// ---------------------------------------------------------------- probes

// tcpExchange sends req and returns what the server answers until it closes
// the connection or the context ends.
func tcpExchange(ctx context.Context, address, req string, stop func([]byte) bool) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	r := bufio.NewReader(c)
	chunk := make([]byte, 4096)
	for {
		n, err := r.Read(chunk)
		buf.Write(chunk[:n])
		if stop != nil && stop(buf.Bytes()) {
			return buf.Bytes(), nil
		}
		if err == io.EOF {
			return buf.Bytes(), nil
		}
		if err != nil {
			return buf.Bytes(), err
		}
	}
}

func redisReady(ctx context.Context, address string) error {
	out, err := tcpExchange(ctx, address, "PING\r\n", func(b []byte) bool { return bytes.Contains(b, []byte("\r\n")) })
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(out, []byte("+PONG")) {
		return fmt.Errorf("PING answered %q", out)
	}
	return nil
}

func etcdReady(ctx context.Context, address string) error {
	out, err := tcpExchange(ctx, address, "GET /health HTTP/1.0\r\nHost: "+address+"\r\n\r\n", nil)
	if err != nil {
		return err
	}
	if !bytes.Contains(out, []byte(`"health":"true"`)) {
		return fmt.Errorf("/health answered %q", lastLine(out))
	}
	return nil
}

func zkReady(ctx context.Context, address string) error {
	out, err := tcpExchange(ctx, address, "srvr", nil)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(out), "\n") {
		switch strings.TrimSpace(l) {
		case "Mode: standalone", "Mode: leader", "Mode: follower":
			return nil
		}
	}
	return fmt.Errorf("srvr answered %q", lastLine(out))
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// ---------------------------------------------------------------- servers

// StartRedis starts n independent redis-server processes (no persistence: a
// restarted server is empty, like a crashed Redlock master), killed at cleanup.
func StartRedis(t testing.TB, n int) []*Proc {
	t.Helper()
	if n <= 0 {
		t.Fatalf("testenv: StartRedis n = %d", n)
	}
	bin := binary(t, "CONCURKIT_REDIS_SERVER", "redis-server")
	return startOnFreePorts(t, n, func(root string, ports []int) []*Proc {
		procs := make([]*Proc, n)
		for i := range procs {
			dir := filepath.Join(root, "redis-"+strconv.Itoa(i+1))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			procs[i] = &Proc{
				Addr: addr(ports[i]), Name: "redis-" + strconv.Itoa(i+1),
				argv: []string{bin, "--port", strconv.Itoa(ports[i]), "--bind", "127.0.0.1",
					"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", ""},
				dir: dir, log: filepath.Join(dir, "redis.log"), ready: redisReady,
			}
		}
		return procs
	})
}

// StartEtcdCluster starts an n-member etcd cluster (each Proc's Addr is its
// client host:port), waits until every member reports healthy, and kills it
// at cleanup. A killed member restarts with its data and rejoins.
func StartEtcdCluster(t testing.TB, n int) []*Proc {
	t.Helper()
	if n <= 0 {
		t.Fatalf("testenv: StartEtcdCluster n = %d", n)
	}
	bin := binary(t, "CONCURKIT_ETCD", "etcd")
	return startOnFreePorts(t, 2*n, func(root string, ports []int) []*Proc {
		var initial []string
		for i := range n {
			initial = append(initial, fmt.Sprintf("m%d=http://%s", i+1, addr(ports[2*i+1])))
		}
		token := Name("ck-")
		procs := make([]*Proc, n)
		for i := range procs {
			name := "m" + strconv.Itoa(i+1)
			dir := filepath.Join(root, name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			client, peer := "http://"+addr(ports[2*i]), "http://"+addr(ports[2*i+1])
			procs[i] = &Proc{
				Addr: addr(ports[2*i]), Name: "etcd-" + strconv.Itoa(i+1),
				argv: []string{bin, "--name", name, "--data-dir", filepath.Join(dir, "data"),
					"--listen-client-urls", client, "--advertise-client-urls", client,
					"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
					"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", token,
					"--initial-cluster-state", "new", "--logger", "zap", "--log-level", "warn"},
				dir: dir, log: filepath.Join(dir, "etcd.log"), ready: etcdReady,
			}
		}
		return procs
	})
}

// zkClasspath is the classpath that runs ZooKeeper from Debian's packages
// (the jar's manifest names its dependencies).
func zkClasspath(t testing.TB) string {
	t.Helper()
	if v := os.Getenv("CONCURKIT_ZK_CLASSPATH"); v != "" {
		return v
	}
	const jar = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(jar); err != nil {
		unavailable(t, fmt.Errorf("%s not found (set CONCURKIT_ZK_CLASSPATH or install zookeeper)", jar))
	}
	return jar + ":/usr/share/java/slf4j-simple.jar"
}

// StartZooKeeperEnsemble starts an n-node ZooKeeper ensemble (standalone when
// n is 1), waits until every node is leader, follower or standalone, and
// kills it at cleanup.
func StartZooKeeperEnsemble(t testing.TB, n int) []*Proc {
	t.Helper()
	if n <= 0 {
		t.Fatalf("testenv: StartZooKeeperEnsemble n = %d", n)
	}
	java := binary(t, "CONCURKIT_JAVA", "java")
	cp := zkClasspath(t)
	return startOnFreePorts(t, 3*n, func(root string, ports []int) []*Proc {
		var servers strings.Builder
		if n > 1 {
			for i := range n {
				fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
			}
		}
		procs := make([]*Proc, n)
		for i := range procs {
			dir := filepath.Join(root, "zk"+strconv.Itoa(i+1))
			data := filepath.Join(dir, "data")
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := fmt.Sprintf(`tickTime=500
initLimit=20
syncLimit=10
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
forceSync=no
maxClientCnxns=0
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr
%s`, data, ports[3*i], servers.String())
			conf := filepath.Join(dir, "zoo.cfg")
			if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			procs[i] = &Proc{
				Addr: addr(ports[3*i]), Name: "zookeeper-" + strconv.Itoa(i+1),
				argv: []string{java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
					"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.jmx.log4j.disable=true",
					"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", conf},
				dir: dir, log: filepath.Join(dir, "zookeeper.log"), ready: zkReady,
			}
		}
		return procs
	})
}

// Addrs returns the Addr of each proc, e.g. for a client's server list.
func Addrs(procs []*Proc) []string {
	out := make([]string, len(procs))
	for i, p := range procs {
		out[i] = p.Addr
	}
	return out
}
