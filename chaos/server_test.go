package chaos_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concurkit/concurkit/chaos"
	"github.com/concurkit/concurkit/testkit"
)

// TestPidFileServerReexec: a server known by its pid file is frozen,
// killed, and run again from what /proc said it ran; the pid file then
// names the new process, which serves on the same address.
func TestPidFileServerReexec(t *testing.T) {
	proc := testkit.StartEtcdCluster(t, 1)[0]
	pid := proc.Pid()
	pidfile := filepath.Join(t.TempDir(), "etcd.pid")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(pid)+" 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := testkit.EtcdClient(t, []string{proc.Addr}, "")
	if _, err := c.Put(t.Context(), "k", "kept"); err != nil {
		t.Fatal(err)
	}
	s := &chaos.PidFileServer{PidFile: pidfile, Reexec: true, Addr: proc.Addr}
	if !s.CanRestart() || (&chaos.PidFileServer{PidFile: pidfile, Reexec: true}).CanRestart() {
		t.Fatal("CanRestart: want true with Addr, false without")
	}
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGCONT, syscall.SIGKILL} {
		if err := s.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	newPid, _ := strconv.Atoi(f[0])
	t.Cleanup(func() { _ = syscall.Kill(-newPid, syscall.SIGKILL) })
	if newPid == pid || newPid == 0 || len(f) != 2 || f[1] == "0" {
		t.Fatalf("pid file after restart: %q (was %d)", b, pid)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := c.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "kept" {
		t.Fatalf("after restart: %v, %v: want the key written before the kill", r, err)
	}
}

// TestPidFileServerRewrittenTitle: a process whose command line cannot be
// run again (Redis rewrites its title) is not killed.
func TestPidFileServerRewrittenTitle(t *testing.T) {
	proc := testkit.StartRedis(t, 1)[0]
	pidfile := filepath.Join(t.TempDir(), "redis.pid")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(proc.Pid())+" 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &chaos.PidFileServer{PidFile: pidfile, Reexec: true, Addr: proc.Addr}
	if err := s.Signal(syscall.SIGKILL); err == nil || !strings.Contains(err.Error(), "cannot be run again") {
		t.Fatalf("SIGKILL of a retitled process: %v", err)
	}
	if !proc.Running() {
		t.Fatal("killed anyway")
	}
}

// The environment of lingeringServerMain and of its lingering child.
const (
	serverEnv = "CHAOS_TEST_LINGERING_SERVER" // the address to serve
	lockEnv   = "CHAOS_TEST_LINGERING_LOCK"   // the lock file
	lingerEnv = "CHAOS_TEST_LINGERING_CHILD"
)

// lingeringServerMain is a TCP server that, like PostgreSQL, will not start
// while a process of its killed predecessor lives on: it takes an flock
// and shares it with a child in a session of its own (as PostgreSQL's
// backends are, so a signal to the server's group misses them), which
// outlives the server by 300 ms, as a backend takes a moment to notice
// its postmaster died.
func lingeringServerMain(addr string) int {
	f, err := os.OpenFile(os.Getenv(lockEnv), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintln(os.Stderr, "lock held by a predecessor:", err)
		return 3
	}
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), lingerEnv+"="+strconv.Itoa(os.Getpid()))
	child.ExtraFiles = []*os.File{f}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		_ = c.Close()
	}
}

// lingerMain holds the inherited lock until 300 ms after its parent (the
// pid in lingerEnv) died.
func lingerMain() int {
	ppid, _ := strconv.Atoi(os.Getenv(lingerEnv))
	for os.Getppid() == ppid {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	return 0
}

// TestPidFileServerReexecLingering: a killed server whose first restart
// exits at once — a process of the killed one still holds what it needs,
// as a killed PostgreSQL's backends hold its shared memory — is started
// again until it serves; its output goes on into the file the killed one
// wrote to. (Started once, make chaos lost its PostgreSQL for the rest of
// the run.)
func TestPidFileServerReexecLingering(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serverEnv+"="+addr, lockEnv+"="+filepath.Join(dir, "lock"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	pidfile := filepath.Join(dir, "server.pid")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(cmd.Process.Pid)+" 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !dial(ctx, addr) {
		if ctx.Err() != nil {
			t.Fatalf("the server did not start: %s", readFile(t, logPath))
		}
	}
	s := &chaos.PidFileServer{PidFile: pidfile, Reexec: true, Addr: addr}
	if err := s.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v\nlog: %s", err, readFile(t, logPath))
	}
	b := readFile(t, pidfile)
	newPid, _ := strconv.Atoi(strings.Fields(b)[0])
	t.Cleanup(func() { _ = syscall.Kill(-newPid, syscall.SIGKILL) })
	if newPid == cmd.Process.Pid || !dial(ctx, addr) {
		t.Fatalf("after Restart: pid file %q (was %d), serving %v", b, cmd.Process.Pid, dial(ctx, addr))
	}
	if log := readFile(t, logPath); !strings.Contains(log, "lock held by a predecessor") {
		t.Fatalf("the first restart was not refused (the test models nothing), or its output was lost: log %q", log)
	}
}

func dial(ctx context.Context, addr string) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		time.Sleep(20 * time.Millisecond) // the poll interval of a server that is starting
		return false
	}
	_ = c.Close()
	return true
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
