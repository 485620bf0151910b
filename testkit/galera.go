package testkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// GaleraNode is one node of a cluster made by StartGalera.
type GaleraNode struct {
	*Proc
}

// DSN returns the node's DSN (root, no password) for database db ("" for
// none), with a one-second dial timeout so that a client gives up on a
// dead node at once.
func (n *GaleraNode) DSN(db string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", n.Addr, db
	cfg.Timeout, cfg.ParseTime, cfg.MultiStatements = time.Second, true, true
	return cfg.FormatDSN()
}

// StartGalera starts a throwaway MariaDB Galera cluster of n nodes on
// private ports (client, group communication, IST and rsync SST ports for
// each), its data in a fresh directory, and kills it at cleanup. The first
// node bootstraps the cluster; the others join it by state transfer. A
// node killed (Proc.Signal(SIGKILL)) and started again (Restart) rejoins
// the running cluster on its own, by state transfer from a donor: Restart
// returns once it is synced. Under root the nodes run as the mysql user
// (an rsync state transfer runs as the server's user).
func StartGalera(t testing.TB, n int) []*GaleraNode {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: StartGalera n = %d", n)
	}
	mariadbd := binary(t, "CONCURKIT_MARIADBD", "mariadbd")
	provider := os.Getenv("CONCURKIT_GALERA_PROVIDER")
	if provider == "" {
		provider = "/usr/lib/galera/libgalera_smm.so"
	}
	if !isFile(provider) {
		unavailable(t, fmt.Errorf("Galera provider %s not found (install galera-4 or set CONCURKIT_GALERA_PROVIDER)", provider))
	}
	var userArgs []string
	var owner *user.User
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			unavailable(t, fmt.Errorf("running as root needs the mysql user: %w", err))
		}
		owner, userArgs = u, []string{"--user=mysql"}
	}
	root, err := os.MkdirTemp("", "ck-galera-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// Nodes join one after the other, each by state transfer: on a
	// loaded machine that takes longer than setupContext allows.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	template := filepath.Join(root, "template")
	install := exec.CommandContext(ctx, "mariadb-install-db", append([]string{"--no-defaults", "--datadir=" + template,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}, userArgs...)...)
	if out, err := install.CombinedOutput(); err != nil {
		unavailable(t, fmt.Errorf("mariadb-install-db: %w\n%s", err, out))
	}
	ports := freePorts(t, 4*n)
	var peers []string
	for i := range n {
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(ports[4*i+1]))
	}
	nodes := make([]*GaleraNode, n)
	for i := range nodes {
		name := "galera-" + strconv.Itoa(i+1)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", template, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
			t.Fatalf("testenv: copy the MariaDB template: %v\n%s", err, out)
		}
		if owner != nil {
			if out, err := exec.Command("chown", "-R", owner.Username+":", dir).CombinedOutput(); err != nil {
				t.Fatalf("testenv: chown %s: %v\n%s", dir, err, out)
			}
		}
		gcomm, ist, sst := ports[4*i+1], ports[4*i+2], ports[4*i+3]
		argv := append([]string{mariadbd, "--no-defaults"}, userArgs...)
		argv = append(argv, "--datadir="+filepath.Join(dir, "data"), "--port="+strconv.Itoa(ports[4*i]),
			"--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "mysqld.sock"), "--pid-file="+filepath.Join(dir, "mysqld.pid"),
			"--tmpdir="+dir, "--skip-name-resolve", "--max-connections=300",
			"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--default-storage-engine=InnoDB",
			"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M",
			"--wsrep-on=ON", "--wsrep-provider="+provider, "--wsrep-cluster-name=ck-"+filepath.Base(root),
			"--wsrep-cluster-address=gcomm://"+strings.Join(peers, ","), "--wsrep-node-name="+name,
			"--wsrep-node-address=127.0.0.1:"+strconv.Itoa(gcomm),
			"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:"+strconv.Itoa(gcomm)+
				";ist.recv_addr=127.0.0.1:"+strconv.Itoa(ist)+";gcache.size=64M"+
				// A dead node is suspected after 1 s and evicted after 3,
				// not 5 and 15: the cluster stalls that long.
				";evs.suspect_timeout=PT1S;evs.inactive_timeout=PT3S;evs.install_timeout=PT3S;evs.keepalive_period=PT0.3S",
			"--wsrep-sst-method=rsync", "--wsrep-sst-receive-address=127.0.0.1:"+strconv.Itoa(sst))
		nodes[i] = &GaleraNode{Proc: &Proc{Addr: addr(ports[4*i]), Name: name, argv: argv, dir: dir,
			log: filepath.Join(dir, "mariadbd.log"), ready: galeraReady}}
	}
	// The first node bootstraps once; started again, it joins the others.
	first := nodes[0].argv
	nodes[0].argv = append(append([]string(nil), first...), "--wsrep-new-cluster")
	procs := make([]*Proc, n)
	for i, g := range nodes {
		procs[i] = g.Proc
		if err := startReady(ctx, procs[i:i+1]); err != nil {
			killAll(procs[:i+1])
			t.Fatalf("testenv: %v", err)
		}
	}
	nodes[0].argv = first
	killAtCleanup(t, procs)
	return nodes
}

func killAll(procs []*Proc) {
	for _, p := range procs {
		_ = p.kill(10 * time.Second)
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// galeraReady probes a Galera node: it answers, and it is synced with the
// cluster's primary component.
func galeraReady(ctx context.Context, address string) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.Timeout = "root", "tcp", address, time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer func() { _ = db.Close() }()
	var name, state string
	if err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state); err != nil {
		return err
	}
	if state != "Synced" {
		return errors.New("wsrep_local_state_comment = " + state)
	}
	return nil
}
