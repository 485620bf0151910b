package chaos_test

import (
	"context"
	"os"
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
