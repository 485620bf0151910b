// Package galeratest puts a test's clients on every node of the MariaDB
// Galera cluster of testkit (testkit.GaleraDSNs) and counts the
// certification conflicts the test caused, so that a test that claims to
// race across nodes can show that it did.
//
// On Galera, locks are node-local: two nodes' transactions that write the
// same row both run to COMMIT, the first to commit wins, and the other
// fails with 1213 at COMMIT (a certification failure), or is aborted by
// the applier of the winner's write set earlier (a brute-force abort, also
// 1213). The nodes count both (wsrep_local_cert_failures,
// wsrep_local_bf_aborts): Conflicts sums them.
package galeratest

import (
	"database/sql"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/testkit"
)

// Cluster is a fresh database on the Galera cluster.
type Cluster struct {
	// DSNs has one DSN per node (testkit.GaleraDSNs).
	DSNs []string
	// Pool opens each new connection on the next node in turn
	// (testkit.GaleraFor): the pool a client of a multi-primary cluster
	// behind a round-robin proxy has, with the server's defaults
	// (wsrep_sync_wait = 0: a read may not see a commit made a moment
	// ago on another node). It keeps no idle connection, so that even one
	// client's consecutive calls run on different nodes: each statement
	// or transaction that is not on a dedicated connection (sql.Conn)
	// opens one on the next node.
	Pool *sql.DB
	// Nodes has one pool per node, for tests that place each client on a
	// node of its choosing.
	Nodes []*sql.DB
	// Synced is a pool over every node whose sessions wait, before each
	// statement, for the node to apply every write the cluster committed
	// before it (wsrep_sync_wait = 15): the test's own reads and checks go
	// through it, so that they see what was committed anywhere.
	Synced *sql.DB
}

// New creates a fresh database on the cluster and opens the pools of a
// Cluster on it, all closed at cleanup.
func New(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{DSNs: testkit.GaleraDSNs(t)}
	// The database was created on the first node: the others may not have
	// applied its CREATE yet.
	for i, dsn := range c.DSNs {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = ""
		server := testkit.MySQLFor(t, cfg.FormatDSN())
		if _, err := server.ExecContext(t.Context(), syncQuery); err != nil {
			t.Fatalf("galeratest: sync node %d: %v", i, err)
		}
		_ = server.Close()
	}
	c.Pool = testkit.GaleraFor(t, c.DSNs)
	c.Pool.SetMaxIdleConns(0)
	synced := make([]string, len(c.DSNs))
	for i, dsn := range c.DSNs {
		c.Nodes = append(c.Nodes, testkit.MySQLFor(t, dsn))
		synced[i] = WithParams(t, dsn, map[string]string{"wsrep_sync_wait": "15"})
	}
	c.Synced = testkit.GaleraFor(t, synced)
	return c
}

// WithParams returns dsn with the session variables params added (the
// driver sets them on every new connection).
func WithParams(t testing.TB, dsn string, params map[string]string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

const syncQuery = "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1"

// Sync waits until every node has applied everything the cluster
// committed before the call (DDL included): a client that writes on any
// node afterwards finds the test's setup there.
func (c *Cluster) Sync(t testing.TB) {
	t.Helper()
	for i, n := range c.Nodes {
		var one int
		if err := n.QueryRowContext(t.Context(), syncQuery).Scan(&one); err != nil {
			t.Fatalf("galeratest: sync node %d: %v", i, err)
		}
	}
}

// Conflicts returns the certification failures plus brute-force aborts
// counted so far by all the nodes together. The counters are the
// servers': a test reports the difference between two calls, which also
// counts the conflicts of other tests running on the cluster meanwhile.
func (c *Cluster) Conflicts(t testing.TB) int64 {
	t.Helper()
	var total int64
	for i, n := range c.Nodes {
		rows, err := n.QueryContext(t.Context(), "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')")
		if err != nil {
			t.Fatalf("galeratest: node %d: %v", i, err)
		}
		seen := 0
		for rows.Next() {
			var name, value string
			if err := rows.Scan(&name, &value); err != nil {
				t.Fatal(err)
			}
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				t.Fatalf("galeratest: node %d: %s = %q", i, name, value)
			}
			total += v
			seen++
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if seen != 2 {
			t.Fatalf("galeratest: node %d reports %d of the 2 wsrep counters: not a Galera node?", i, seen)
		}
	}
	return total
}

// Counted runs fn and returns the conflicts the cluster counted while it
// ran (see Conflicts), which it also logs with what.
func (c *Cluster) Counted(t testing.TB, what string, fn func()) int64 {
	t.Helper()
	before := c.Conflicts(t)
	fn()
	n := c.Conflicts(t) - before
	t.Logf("%s: %d certification failures and brute-force aborts on the cluster (sum of wsrep_local_cert_failures and wsrep_local_bf_aborts over the %d nodes)", what, n, len(c.Nodes))
	return n
}
