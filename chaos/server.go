package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql" for sql.Open
	"github.com/jackc/pgx/v5"
)

// Server is a server process a run may freeze (SIGSTOP, then SIGCONT) and
// kill (SIGKILL, then Restart): the NemesisServerPause and
// NemesisServerKill faults. Give a run only servers it may break — ones
// started for it (a *testkit.Proc is a Server), or your own test stack —
// never servers other work shares.
type Server interface {
	// Signal sends sig to the server's process (group).
	Signal(sig syscall.Signal) error
	// Restart starts the server again after a kill and returns once it
	// serves requests, or ctx ends.
	Restart(ctx context.Context) error
}

// Partitioner cuts a cluster's servers off from one another and heals the
// cut: the NemesisPartition fault. *testkit.Netns is one (servers in
// network namespaces of their own, cut with blackhole routes).
type Partitioner interface {
	// Len is the number of servers.
	Len() int
	// Partition cuts the servers in group off from the others, both ways.
	Partition(group ...int) error
	// Heal removes every cut.
	Heal() error
}

// PidFileServer is a Server known by its pid file, for servers a script
// started (scripts/services.sh keeps $CONCURKIT_STATE/run/NAME.pid; the
// first number in the file is the pid). Signals go to the process group
// when the process leads one, else to the process.
type PidFileServer struct {
	// PidFile is the file the pid is read from, at every signal.
	PidFile string
	// Reexec, with no RestartCommand, restarts a killed server by running
	// again exactly what was running: the command line, working directory,
	// environment and user read from /proc just before SIGKILL, in a
	// session of its own, its output appended to the files the killed
	// process wrote to (when they were files); the new pid and its start
	// time go to the pid file ("pid start-time", the format of
	// scripts/services.sh). The data directory is kept: a crash and a
	// restart, as a database sees them. A server that exits at once —
	// PostgreSQL refuses to start while the backends of the killed
	// postmaster (each in a session of its own, so no group signal
	// reaches them) still hold its shared memory — is started again
	// until it serves or Restart's context ends.
	Reexec bool
	// Addr is the server's host:port; Restart returns once it accepts
	// connections (needed by Reexec).
	Addr string
	// last is what was running before the last SIGKILL (Reexec).
	last *process
	// RestartCommand is the argv that starts the server again and exits
	// once it serves requests, e.g. {"scripts/services.sh", "up", "redis"}
	// (which starts it on a fresh data directory: right for a Redis
	// without persistence, a data loss for a database). Empty: the server
	// is only ever paused.
	RestartCommand []string
}

// pid reads the pid file.
func (s *PidFileServer) pid() (int, error) {
	b, err := os.ReadFile(s.PidFile)
	if err != nil {
		return 0, fmt.Errorf("chaos: server pid: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("chaos: server pid file %s is empty", s.PidFile)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("chaos: server pid file %s: %q is not a pid", s.PidFile, f[0])
	}
	return pid, nil
}

// Signal sends sig to the process (group) named by the pid file. Before a
// SIGKILL of a Reexec server it records what is running.
func (s *PidFileServer) Signal(sig syscall.Signal) error {
	pid, err := s.pid()
	if err != nil {
		return err
	}
	if sig == syscall.SIGKILL && s.Reexec && len(s.RestartCommand) == 0 {
		if s.last, err = readProcess(pid); err != nil {
			return err
		}
	}
	if g, err := syscall.Getpgid(pid); err == nil && g == pid {
		pid = -pid // a group leader: signal its children too
	}
	return syscall.Kill(pid, sig)
}

// CanRestart reports whether s has a RestartCommand or Reexec:
// NemesisServerKill kills only servers that can be brought back.
func (s *PidFileServer) CanRestart() bool {
	return len(s.RestartCommand) > 0 || (s.Reexec && s.Addr != "")
}

// Restart runs RestartCommand and waits for it, or, with Reexec, runs
// again what was killed and waits until Addr accepts connections.
func (s *PidFileServer) Restart(ctx context.Context) error {
	if len(s.RestartCommand) == 0 && s.Reexec {
		return s.reexec(ctx)
	}
	if len(s.RestartCommand) == 0 {
		return fmt.Errorf("chaos: server %s has no restart command", s.PidFile)
	}
	out, err := exec.CommandContext(ctx, s.RestartCommand[0], s.RestartCommand[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: restart %s: %w: %s", strings.Join(s.RestartCommand, " "), err, tail(string(out), 500))
	}
	return nil
}

// injectPartition cuts the server f.Pick chooses off from the rest of its
// cluster for f.For (a minority of one: a leader, as often as not, loses
// its quorum).
func (n *nemesis) injectPartition(ctx context.Context, f *Fault, wait func(time.Duration)) error {
	if n.partitioner == nil || n.partitioner.Len() < 2 {
		return fmt.Errorf("no cluster to partition (Config.Partitioner)")
	}
	member := int(f.Pick % uint64(n.partitioner.Len()))
	f.Target = fmt.Sprintf("member %d", member+1)
	if err := n.partitioner.Partition(member); err != nil {
		return errors.Join(err, n.partitioner.Heal())
	}
	wait(f.For)
	return n.partitioner.Heal()
}

// canRestart reports whether NemesisServerKill may kill s: unless s says
// it cannot be restarted (PidFileServer without a command), it can.
func canRestart(s Server) bool {
	r, ok := s.(interface{ CanRestart() bool })
	return !ok || r.CanRestart()
}

// process is what /proc says a process runs.
type process struct {
	argv     []string
	dir      string
	env      []string
	uid, gid uint32
	// out are the regular files the process's stdout and stderr were
	// ("" for anything else: a pipe, a terminal, /dev/null).
	out [2]string
}

// readProcess reads pid's command line, working directory, environment
// and real user and group from /proc.
func readProcess(pid int) (*process, error) {
	base := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(base + "/cmdline")
	if err != nil {
		return nil, fmt.Errorf("chaos: read server process: %w", err)
	}
	environ, err := os.ReadFile(base + "/environ")
	if err != nil {
		return nil, fmt.Errorf("chaos: read server process: %w", err)
	}
	dir, err := os.Readlink(base + "/cwd")
	if err != nil {
		return nil, fmt.Errorf("chaos: read server process: %w", err)
	}
	status, err := os.ReadFile(base + "/status")
	if err != nil {
		return nil, fmt.Errorf("chaos: read server process: %w", err)
	}
	p := &process{argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), dir: dir,
		env: strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")}
	for line := range strings.Lines(string(status)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Uid:", "Gid:":
			id, err := strconv.ParseUint(f[1], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("chaos: server process %s %q", f[0], f[1])
			}
			if f[0] == "Uid:" {
				p.uid = uint32(id)
			} else {
				p.gid = uint32(id)
			}
		}
	}
	for i := range p.out {
		link, err := os.Readlink(base + "/fd/" + strconv.Itoa(i+1))
		if fi, serr := os.Stat(link); err == nil && serr == nil && fi.Mode().IsRegular() {
			p.out[i] = link
		}
	}
	if len(p.argv) == 0 || p.argv[0] == "" {
		return nil, fmt.Errorf("chaos: server process %d has no command line", pid)
	}
	// A process that rewrote its title (Redis does) shows a command line
	// that cannot be run again: say so before it is killed.
	if _, err := exec.LookPath(p.argv[0]); err != nil {
		return nil, fmt.Errorf("chaos: server process %d's command line %q cannot be run again (a rewritten process title?): %w", pid, p.argv[0], err)
	}
	return p, nil
}

// reexec starts s.last again, records its pid, and waits for s.Addr.
func (s *PidFileServer) reexec(ctx context.Context) error {
	p := s.last
	if p == nil || s.Addr == "" {
		return fmt.Errorf("chaos: server %s: nothing to run again (no SIGKILL recorded, or no Addr)", s.PidFile)
	}
	// Wait for the killed server to let go of its port.
	for dialable(ctx, s.Addr) {
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	for {
		exited, err := s.start(p)
		if err != nil {
			return err
		}
		gone := false
		var status error
		for !gone && !dialable(ctx, s.Addr) {
			select {
			case status = <-exited:
				gone = true
			case <-ctx.Done():
				return fmt.Errorf("chaos: restart %s: %s not answering: %w", p.argv[0], s.Addr, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !gone {
			return nil
		}
		// It exited before it served: start it again (what stopped it is
		// in its log).
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("chaos: restart %s: exited (%v), %s not answering: %w%s", p.argv[0], status, s.Addr, err, logTail(p.out[1]))
		}
	}
}

// start runs p once, in a session of its own, and records its pid in the
// pid file; the channel gets its exit.
func (s *PidFileServer) start(p *process) (<-chan error, error) {
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if uint32(os.Getuid()) != p.uid || uint32(os.Getgid()) != p.gid {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: p.uid, Gid: p.gid}
	}
	for i, path := range p.out {
		if path == "" {
			continue
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			continue // gone: its output goes to /dev/null
		}
		defer f.Close() // the child has its own descriptor
		if i == 0 {
			cmd.Stdout = f
		} else {
			cmd.Stderr = f
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: restart %s: %w", p.argv[0], err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reap it if it dies while the run goes on
	if st, err := startTime(pid); err == nil {
		_ = os.WriteFile(s.PidFile, []byte(strconv.Itoa(pid)+" "+st+"\n"), 0o644)
	}
	return exited, nil
}

// logTail is ": " and the end of the file at path, for an error.
func logTail(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return ": " + tail(string(b), 500)
}

// startTime is field 22 of /proc/pid/stat, which scripts/services.sh
// keeps beside the pid to tell its process from a reused pid.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 20 {
		return "", fmt.Errorf("chaos: short /proc/%d/stat", pid)
	}
	return f[19], nil
}

// dialable reports whether addr accepts a TCP connection.
func dialable(ctx context.Context, addr string) bool {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// serverDown bounds a restart after NemesisServerKill (a server that
// needs longer is reported as a failed fault, and the run goes on).
const serverDown = 90 * time.Second

// injectServer runs a server fault on the server f.Pick chooses.
func (n *nemesis) injectServer(ctx context.Context, f *Fault, wait func(time.Duration)) error {
	if len(n.serverNames) == 0 {
		return fmt.Errorf("no server to %s (Config.Servers)", f.Kind)
	}
	names := n.serverNames
	if f.Kind == NemesisServerKill {
		names = nil
		for _, name := range n.serverNames {
			if canRestart(n.servers[name]) {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("no server that can be restarted")
		}
	}
	name := names[int(f.Pick%uint64(len(names)))]
	s := n.servers[name]
	f.Target = name
	switch f.Kind {
	case NemesisServerPause:
		if err := s.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		wait(f.For)
		return s.Signal(syscall.SIGCONT)
	case NemesisServerKill:
		if err := s.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		wait(f.For)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverDown)
		defer cancel()
		return s.Restart(rctx)
	}
	return fmt.Errorf("unknown server nemesis %q", f.Kind)
}

// SQL of NemesisTerminate: end the run's sessions from the server side.
const (
	pgTerminate = `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = $1 AND pid <> pg_backend_pid()`
	mysqlSessions = `SELECT ID FROM information_schema.PROCESSLIST
WHERE (DB = ? OR DB = ?) AND ID <> CONNECTION_ID()`
)

// terminate ends the run's database sessions on one server, as an
// operator's pg_terminate_backend or KILL would: PostgreSQL's are those
// with the run's application_name (Run sets it in the clients' URL),
// MySQL's those using the run's database or concurkit_chaos. It returns
// the number of sessions ended.
func terminate(ctx context.Context, e *env, system string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch system {
	case "postgres":
		conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
		if err != nil {
			return 0, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var n int
		err = conn.QueryRow(ctx, pgTerminate, e.Run).Scan(&n)
		return n, err
	case "mysql":
		db, err := sql.Open("mysql", e.Endpoints.MySQL)
		if err != nil {
			return 0, err
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, mysqlSessions, e.Run, registerDatabase)
		if err != nil {
			return 0, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
		n := 0
		for _, id := range ids {
			// KILL takes no placeholder; id is a number the server gave.
			if _, err := db.ExecContext(ctx, "KILL "+strconv.FormatInt(id, 10)); err == nil {
				n++
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("no session to terminate on %s", system)
}

// withApplicationName sets application_name in a PostgreSQL URL, so that
// terminate can find the run's sessions.
func withApplicationName(pgURL, name string) string {
	u, err := url.Parse(pgURL)
	if err != nil {
		return pgURL
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}
