package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresNode is one server of a replication group made by
// StartPostgresReplication: a Proc (Signal, Restart, Kill…) that can also
// be made, after it was killed, a standby of another node again.
type PostgresNode struct {
	*Proc
	data   string   // its data directory
	bin    string   // PostgreSQL's bin directory
	asUser []string // argv prefix running a command as the data's owner
	sync   bool     // the group's standbys are synchronous
}

// URL returns a postgres:// URL for the node (user postgres, trust auth).
func (n *PostgresNode) URL() string {
	return "postgres://postgres@" + n.Addr + "/postgres?sslmode=disable"
}

// Rejoin makes the node, which must have been killed, a standby of primary
// (host:port) again: it waits for the old process to exit, copies the
// primary afresh into its data directory (pg_basebackup -R) and starts it,
// returning once it streams from the primary — what an operator does to a
// failed primary after a failover.
func (n *PostgresNode) Rejoin(ctx context.Context, primary string) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("testkit: rejoin %s: still running: %w", n.Name, ctx.Err())
		}
	}
	killOrphans(n.data)
	if err := os.RemoveAll(n.data); err != nil {
		return fmt.Errorf("testkit: rejoin %s: %w", n.Name, err)
	}
	if err := basebackup(ctx, n.bin, n.asUser, primary, n.data, n.log); err != nil {
		return fmt.Errorf("testkit: rejoin %s: %w", n.Name, err)
	}
	if err := n.Restart(ctx); err != nil {
		return err
	}
	return waitStreaming(ctx, "postgres://postgres@"+primary+"/postgres?sslmode=disable", 1, n.sync)
}

// StartPostgresReplication starts a PostgreSQL primary and one streaming
// hot standby of it, each on a private port with its data in a fresh
// directory, and kills them at cleanup. With sync, the primary's commits
// wait for the standby's flush (synchronous_standby_names = 'FIRST 1
// (*)', on both servers so that either may be the primary); without it,
// the standby is asynchronous and may lose acknowledged commits when it
// is promoted. The servers run durable (fsync on, synchronous_commit on),
// as the postgres user when the test runs as root. nodes[0] is the
// primary.
func StartPostgresReplication(t testing.TB, sync bool) []*PostgresNode {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Strings(bins)
	bin := os.Getenv("CONCURKIT_PG_BIN")
	if bin == "" && len(bins) > 0 {
		bin = filepath.Dir(bins[len(bins)-1])
	}
	if bin == "" {
		unavailable(t, errors.New("PostgreSQL's server binaries not found (set CONCURKIT_PG_BIN or install postgresql)"))
	}
	var asUser []string
	var owner *user.User
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable(t, fmt.Errorf("running as root needs the postgres user: %w", err))
		}
		owner, asUser = u, []string{"setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"}
	}
	// Not t.TempDir: its parents are private to root, which the postgres
	// user could not enter.
	root, err := os.MkdirTemp("", "ck-pgrepl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mkdir := func(p string) {
		t.Helper()
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != nil {
			uid, _ := strconv.Atoi(owner.Uid)
			gid, _ := strconv.Atoi(owner.Gid)
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := ""
	if sync {
		names = "FIRST 1 (*)"
	}
	ports := freePorts(t, 2)
	nodes := make([]*PostgresNode, 2)
	for i := range nodes {
		name := "pg-" + strconv.Itoa(i+1)
		dir := filepath.Join(root, name)
		mkdir(dir)
		mkdir(filepath.Join(dir, "sock"))
		data := filepath.Join(dir, "data")
		argv := append(append([]string(nil), asUser...), filepath.Join(bin, "postgres"), "-D", data,
			"-c", "port="+strconv.Itoa(ports[i]), "-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories="+filepath.Join(dir, "sock"), "-c", "max_connections=200",
			"-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "hot_standby=on",
			"-c", "wal_keep_size=128MB", "-c", "synchronous_standby_names="+names,
			"-c", "cluster_name="+name)
		nodes[i] = &PostgresNode{Proc: &Proc{Addr: addr(ports[i]), Name: name, argv: argv, dir: dir,
			log: filepath.Join(dir, "postgres.log"), ready: postgresProcReady}, data: data, bin: bin, asUser: asUser, sync: sync}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // initdb, start, base backup, start
	defer cancel()
	initdb := asOwner(ctx, asUser, filepath.Join(bin, "initdb"), "-D", nodes[0].data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("testenv: initdb: %v\n%s", err, out)
	}
	if err := startReady(ctx, []*Proc{nodes[0].Proc}); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	killAtCleanup(t, []*Proc{nodes[0].Proc})
	if err := basebackup(ctx, bin, asUser, nodes[0].Addr, nodes[1].data, nodes[1].log); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := startReady(ctx, []*Proc{nodes[1].Proc}); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	killAtCleanup(t, []*Proc{nodes[1].Proc})
	if err := waitStreaming(ctx, nodes[0].URL(), 1, sync); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return nodes
}

// asOwner returns the command running bin with args as the data's owner.
func asOwner(ctx context.Context, asUser []string, bin string, args ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), asUser...), bin), args...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// basebackup copies the server at primary (host:port) into data, as a
// standby of it (-R: standby.signal and primary_conninfo).
func basebackup(ctx context.Context, bin string, asUser []string, primary, data, log string) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return err
	}
	cmd := asOwner(ctx, asUser, filepath.Join(bin, "pg_basebackup"), "-h", host, "-p", port, "-U", "postgres",
		"-D", data, "-R", "-X", "stream", "--no-sync")
	out, err := cmd.CombinedOutput()
	if f, ferr := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
		_, _ = f.Write(out)
		_ = f.Close()
	}
	if err != nil {
		return fmt.Errorf("pg_basebackup from %s: %w\n%s", primary, err, out)
	}
	return nil
}

// waitStreaming waits until the primary at url has n standbys streaming,
// synchronous ones if sync (a standby is asynchronous for a moment after
// it connects).
func waitStreaming(ctx context.Context, url string, n int, sync bool) error {
	ctx, cancel := context.WithTimeout(ctx, ProcReadyTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		var got int
		last = func() error {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer c.Close(context.WithoutCancel(ctx))
			return c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND (sync_state = 'sync' OR NOT $1)", sync).Scan(&got)
		}()
		if last == nil && got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d standbys streaming, want %d: %w (last: %v)", got, n, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// postgresProcReady probes a server of StartPostgresReplication: it
// accepts a connection and answers (a standby too).
func postgresProcReady(ctx context.Context, address string) error {
	c, err := pgx.Connect(ctx, "postgres://postgres@"+address+"/postgres?sslmode=disable")
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return c.Ping(ctx)
}

// killOrphans kills what is left of a killed postmaster: its backends run
// in sessions of their own, so the process-group SIGKILL missed them, and
// they would go on holding its shared memory. It finds them by their
// working directory, the data directory.
func killOrphans(data string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == data {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// FreezeWALSenders stops (SIGSTOP) the node's WAL senders, so that its
// standbys receive nothing more: a commit then waits for a synchronous
// standby, and is acknowledged without an asynchronous one. It returns
// their pids. They are killed at cleanup, not thawed (a thawed sender
// would send what it holds): kill the node and them to fail over.
func (n *PostgresNode) FreezeWALSenders(t testing.TB) []int {
	t.Helper()
	ctx, cancel := setupContext(t)
	defer cancel()
	c, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		t.Fatalf("testenv: %s: %v", n.Name, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_replication")
	if err != nil {
		t.Fatalf("testenv: %s: %v", n.Name, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil || len(pids) == 0 {
		t.Fatalf("testenv: %s: WAL senders %v, %v", n.Name, pids, err)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("testenv: stop WAL sender %d of %s: %v", pid, n.Name, err)
		}
	}
	return pids
}

// Promote promotes the node, a standby (after its primary was killed, as
// a rule), and returns once it takes writes.
func (n *PostgresNode) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := setupContext(t)
	defer cancel()
	c, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		t.Fatalf("testenv: %s: %v", n.Name, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil || !ok {
		t.Fatalf("testenv: promote %s: %v, %v", n.Name, ok, err)
	}
}

// WaitingForStandby waits (at most ProcReadyTimeout) until sessions of the
// node wait for the synchronous standby to confirm their commit
// (wait_event SyncRep), and returns their pids.
func (n *PostgresNode) WaitingForStandby(t testing.TB) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ProcReadyTimeout)
	defer cancel()
	c, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		t.Fatalf("testenv: %s: %v", n.Name, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
		if err == nil {
			if pids, err := pgx.CollectRows(rows, pgx.RowTo[int]); err == nil && len(pids) > 0 {
				return pids
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: %s: no session waits for the standby: %v", n.Name, ctx.Err())
		case <-tick.C:
		}
	}
}
