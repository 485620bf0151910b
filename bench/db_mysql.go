package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/redact"
	"github.com/concurkit/concurkit/internal/roundrobin"
)

// MariaDB statements of the benchmark's own housekeeping.
const (
	myForeignTables = "SELECT table_name FROM information_schema.tables WHERE table_schema = ?"
	myCreateDB      = "CREATE DATABASE IF NOT EXISTS %s"
	myCreateTable   = "CREATE TABLE IF NOT EXISTS %s.%s " + tableColumns + " ENGINE=InnoDB"
	myDropDB        = "DROP DATABASE IF EXISTS %s"
	myTruncate      = "TRUNCATE TABLE %s.%s"
	myFillPrefix    = "INSERT INTO %s.%s (id, v) VALUES "
	myReadAll       = "SELECT id, v, w FROM %s.%s"
	myStatus        = "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_fsyncs', 'Innodb_data_fsyncs')"
	myVariables     = "SHOW GLOBAL VARIABLES WHERE Variable_name IN " +
		"('version', 'innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin', 'innodb_flush_method', " +
		"'innodb_doublewrite', 'tx_isolation', 'transaction_isolation', 'datadir', 'max_connections', " +
		"'innodb_buffer_pool_size', 'innodb_lock_wait_timeout', 'version_comment', " +
		"'wsrep_on', 'wsrep_sync_wait', 'wsrep_retry_autocommit', 'wsrep_slave_threads')"
	myProbeUpdate = "UPDATE %s.%s SET v = v + 1 WHERE id = 1"
	myCountRows   = "SELECT COUNT(*) FROM %s.%s"
	// Galera: whether wsrep replication is on, the cluster's size and
	// the counters of a node's conflicts and local commits.
	myWsrepOn    = "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'"
	myWsrepSize  = "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'"
	myWsrepStats = "SHOW GLOBAL STATUS WHERE Variable_name IN " +
		"('wsrep_local_cert_failures', 'wsrep_local_bf_aborts', 'wsrep_local_commits')"
)

// myFillBatch rows are inserted per statement.
const myFillBatch = 1000

type myEnv struct {
	s       *Settings
	admin   *sql.DB // on one node (adminNode); no default database
	cfg     *mysql.Config
	nodes   []*mysql.Config // one per DSN of the list, as cfg
	schema  string          // quoted
	locks   *lockClients
	prefix  string
	counter string // the fsync status variable, "" if none

	// adminNode is the index in nodes of the node admin connects to.
	adminNode int
	// galera is set when the server runs with wsrep_on=ON; then admin's
	// sessions and each of causal (one pool per node, nil where the node
	// did not answer at start) wait for the cluster's earlier commits
	// before a read (wsrep_sync_wait=1).
	galera bool
	causal []*sql.DB
}

func myQuote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// nodeDialTimeout bounds the dial of one node of a DSN list whose DSN
// sets no timeout, so that a node that does not answer delays a
// connection by that much instead of the system's TCP timeout.
const nodeDialTimeout = 5 * time.Second

// myConfig parses one node's DSN as the benchmark uses it: no default
// database, interpolateParams on unless the DSN sets it, and, in a list,
// a dial timeout.
func myConfig(dsn string, list bool) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	if !strings.Contains(dsn, "interpolateParams=") {
		// What concurkit recommends: without it go-sql-driver prepares
		// every statement with parameters on the server, a round trip of
		// its own (the hot-row CAS ran at 0.68× FOR UPDATE without it,
		// ≥1.0× with it). A DSN that sets it either way is measured as is.
		cfg.InterpolateParams = true
	}
	if list && cfg.Timeout == 0 {
		cfg.Timeout = nodeDialTimeout
	}
	return cfg, nil
}

// myOpen returns a pool on one node's cfg, with db as its default
// database ("" for none) and, when causal, wsrep_sync_wait=1.
func myOpen(cfg *mysql.Config, db string, causal bool) (*sql.DB, error) {
	cfg = cfg.Clone()
	cfg.DBName = db
	if causal {
		// A copy: Clone shares an empty Params map with cfg.
		cfg.Params = maps.Clone(cfg.Params)
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["wsrep_sync_wait"] = "1"
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

func openMariaDB(ctx context.Context, s *Settings, locks *lockClients, runID string) (*myEnv, error) {
	e := &myEnv{s: s, schema: myQuote(s.Schema), locks: locks, prefix: runID + "/mariadb/"}
	for _, dsn := range s.mysqlDSNs {
		cfg, err := myConfig(dsn, len(s.mysqlDSNs) > 1)
		if err != nil {
			return nil, fmt.Errorf("bench: mysql DSN: %w", redact.Error(err, s.mysqlDSNs...))
		}
		e.nodes = append(e.nodes, cfg)
	}
	// The first node that answers takes the setup, the resets and the
	// check's reads.
	var errs []error
	for i, cfg := range e.nodes {
		db, err := myOpen(cfg, "", false)
		if err == nil {
			db.SetMaxOpenConns(2)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = db.PingContext(cctx)
			if err == nil {
				err = e.detectGalera(cctx, db)
			}
			cancel()
			if err == nil {
				e.admin, e.cfg, e.adminNode = db, cfg, i
				break
			}
			_ = db.Close()
		}
		errs = append(errs, fmt.Errorf("bench: mariadb %s: %w", redact.DSN(s.mysqlDSNs[i]), redact.Error(err, s.mysqlDSNs...)))
		if ctx.Err() != nil {
			break
		}
	}
	if e.admin == nil {
		return nil, errors.Join(errs...)
	}
	if !e.galera {
		return e, nil
	}
	// Galera applies another node's commits a moment after they return:
	// the admin node's reads (the check) and each node's read after a
	// reset wait for the cluster's earlier commits.
	_ = e.admin.Close()
	admin, err := myOpen(e.cfg, "", true)
	if err != nil {
		return nil, fmt.Errorf("bench: mysql DSN: %w", redact.Error(err, s.mysqlDSNs...))
	}
	admin.SetMaxOpenConns(2)
	e.admin = admin
	for _, cfg := range e.nodes {
		db, err := myOpen(cfg, "", true)
		if err != nil {
			db = nil
		} else {
			db.SetMaxOpenConns(1)
		}
		e.causal = append(e.causal, db)
	}
	return e, nil
}

// detectGalera sets e.galera when db's server runs with wsrep_on=ON.
func (e *myEnv) detectGalera(ctx context.Context, db *sql.DB) error {
	var name, value string
	err := db.QueryRowContext(ctx, myWsrepOn).Scan(&name, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // MySQL: no wsrep
	}
	if err != nil {
		return err
	}
	e.galera = strings.EqualFold(value, "ON")
	return nil
}

func (e *myEnv) close() {
	_ = e.admin.Close()
	for _, db := range e.causal {
		if db != nil {
			_ = db.Close()
		}
	}
}

// dbFor returns a pool whose default database is the benchmark's: on the
// admin node, or, when spread, over every node of the list in turn.
func (e *myEnv) dbFor(conns int, spread bool) (*sql.DB, *roundrobin.Connector, error) {
	nodes := e.nodes
	if !spread {
		nodes = e.nodes[e.adminNode : e.adminNode+1]
	}
	var connectors []driver.Connector
	for _, cfg := range nodes {
		cfg = cfg.Clone()
		cfg.DBName = e.s.Schema
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, nil, err
		}
		connectors = append(connectors, connector)
	}
	rr := roundrobin.New(connectors...)
	db := sql.OpenDB(rr)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, rr, nil
}

func (e *myEnv) claim(ctx context.Context) error {
	rows, err := e.admin.QueryContext(ctx, myForeignTables, e.s.Schema)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	rows.Close()
	for _, n := range names {
		if !slices.Contains(benchTables, n) && n != tokenSequence {
			return fmt.Errorf("bench: mariadb database %s holds table %q, which the benchmark did not create: choose another schema", e.s.Schema, n)
		}
	}
	return nil
}

func (e *myEnv) setup(ctx context.Context) error {
	if _, err := e.admin.ExecContext(ctx, fmt.Sprintf(myCreateDB, e.schema)); err != nil {
		return err
	}
	for _, t := range benchTables {
		if _, err := e.admin.ExecContext(ctx, fmt.Sprintf(myCreateTable, e.schema, myQuote(t))); err != nil {
			return err
		}
	}
	// On Galera each node draws from its own copy of a SEQUENCE (and
	// refuses one with a cache, error 1235): its values are no fencing
	// tokens, so there is no token sequence and redis-fenced is skipped
	// (see myFencedLock).
	if !e.galera {
		db, _, err := e.dbFor(1, false)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := myCreateTokenSequence(ctx, db); err != nil {
			return err
		}
	}
	return e.reset(ctx, tableSyncProbe, 1, 0)
}

func (e *myEnv) drop(ctx context.Context) error {
	_, err := e.admin.ExecContext(ctx, fmt.Sprintf(myDropDB, e.schema))
	return err
}

func (e *myEnv) reset(ctx context.Context, table string, n int, initV int64) error {
	t := myQuote(table)
	if _, err := e.admin.ExecContext(ctx, fmt.Sprintf(myTruncate, e.schema, t)); err != nil {
		return err
	}
	prefix := fmt.Sprintf(myFillPrefix, e.schema, t)
	for from := 1; from <= n; from += myFillBatch {
		to := min(from+myFillBatch-1, n)
		var b strings.Builder
		b.WriteString(prefix)
		args := make([]any, 0, 2*(to-from+1))
		for id := from; id <= to; id++ {
			if id > from {
				b.WriteByte(',')
			}
			b.WriteString("(?,?)")
			args = append(args, id, initV)
		}
		if _, err := e.admin.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return e.awaitNodes(ctx, table)
}

// awaitNodes returns once every Galera node that answers has applied the
// rows the admin node wrote to table: a causal read (wsrep_sync_wait=1)
// on each. Without it the workers of another node could start before
// their node holds the reset rows. A node that does not answer is left to
// the connector, which skips it.
func (e *myEnv) awaitNodes(ctx context.Context, table string) error {
	q := fmt.Sprintf(myCountRows, e.schema, myQuote(table))
	for i, db := range e.causal {
		if db == nil || i == e.adminNode {
			continue
		}
		var n int64
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := db.QueryRowContext(cctx, q).Scan(&n)
		cancel()
		if err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}

func (e *myEnv) syncs(ctx context.Context) (int64, bool) {
	rows, err := e.admin.QueryContext(ctx, myStatus)
	if err != nil {
		return -1, false
	}
	defer rows.Close()
	vals := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if rows.Scan(&k, &v) == nil {
			vals[k] = v
		}
	}
	if e.counter == "" {
		// MariaDB ≥ 10.8 counts redo-log syncs in Innodb_data_fsyncs (it
		// has no Innodb_os_log_fsyncs any more); MySQL has both.
		for _, k := range []string{"Innodb_os_log_fsyncs", "Innodb_data_fsyncs"} {
			if _, ok := vals[k]; ok {
				e.counter = k
				break
			}
		}
	}
	v, ok := vals[e.counter]
	if !ok {
		return -1, false
	}
	return v, true
}

func (e *myEnv) rows(ctx context.Context, table string) (map[int64]rowState, error) {
	rows, err := e.admin.QueryContext(ctx, fmt.Sprintf(myReadAll, e.schema, myQuote(table)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]rowState{}
	for rows.Next() {
		var id int64
		var r rowState
		if err := rows.Scan(&id, &r.v, &r.w); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}

func (e *myEnv) info(ctx context.Context, probe time.Duration) Server {
	srv := Server{DB: MariaDB, Endpoint: redactDSNs(e.s.mysqlDSNs), Settings: map[string]string{}}
	if len(e.nodes) > 1 {
		srv.Nodes = slices.Clone(e.s.MySQLNodes)
		srv.AdminNode = e.adminNode + 1
	}
	rows, err := e.admin.QueryContext(ctx, myVariables)
	if err != nil {
		srv.Error = err.Error()
		return srv
	}
	for rows.Next() {
		var k, v string
		if rows.Scan(&k, &v) == nil {
			srv.Settings[k] = v
		}
	}
	rows.Close()
	srv.Settings["client:interpolateParams"] = strconv.FormatBool(e.cfg.InterpolateParams)
	srv.Version = strings.TrimSpace(srv.Settings["version"] + " " + srv.Settings["version_comment"])
	if e.galera {
		var name string
		_ = e.admin.QueryRowContext(ctx, myWsrepSize).Scan(&name, &srv.ClusterSize)
		srv.Label = "MariaDB Galera"
		if srv.ClusterSize > 0 {
			srv.Label += fmt.Sprintf(" (%s)", plural(srv.ClusterSize, "node"))
		}
	}
	srv.Durable = srv.Settings["innodb_flush_log_at_trx_commit"] == "1"
	srv.DataDir = srv.Settings["datadir"]
	if _, ok := e.syncs(ctx); ok {
		srv.SyncCounter = e.counter
	}
	if probe <= 0 {
		return srv
	}
	if srv.DataDir != "" && e.local() {
		if _, err := os.Stat(srv.DataDir); err == nil {
			if r, err := diskSync(ctx, srv.DataDir, probe); err == nil {
				srv.Disk = r
			}
		}
	}
	q := fmt.Sprintf(myProbeUpdate, e.schema, myQuote(tableSyncProbe))
	conn, err := e.admin.Conn(ctx)
	if err == nil {
		if r, err := timedLoop(ctx, "single-row UPDATE commits, one connection", "", probe, func() error {
			_, err := conn.ExecContext(ctx, q)
			return err
		}); err == nil {
			srv.CommitLoop = r
		}
		_ = conn.Close()
	}
	setCeiling(&srv)
	return srv
}

// local reports whether the server is on this machine.
func (e *myEnv) local() bool {
	switch e.cfg.Net {
	case "unix":
		return true
	case "tcp", "tcp4", "tcp6", "":
		host, _, err := net.SplitHostPort(e.cfg.Addr)
		if err != nil {
			host = e.cfg.Addr
		}
		return isLoopback(host)
	}
	return false
}

func (e *myEnv) maxConnections(ctx context.Context) int {
	var v int
	_ = e.admin.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&v)
	return v
}

func (e *myEnv) open(ctx context.Context, workers int, table, readMode string) (cellDB, error) {
	db, rr, err := e.dbFor(workers+spareConns, true)
	if err != nil {
		return nil, err
	}
	conns := make([]*sql.Conn, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { conns[i], errs[i] = db.Conn(ctx) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			_ = c.Close() // back to the pool, open
		}
	}
	if err := errors.Join(errs...); err != nil {
		_ = db.Close()
		return nil, redact.Error(err, e.s.mysqlDSNs...)
	}
	return &myCell{t: &myTarget{db: db, table: table, readMode: readMode, locks: e.locks, lockPrefix: e.prefix, galera: e.galera}, rr: rr}, nil
}

type myCell struct {
	t  *myTarget
	rr *roundrobin.Connector
}

func (c *myCell) nodeConns() []int64 { return c.rr.Opened() }

func (c *myCell) executor(d *strategyDef) (executor, error) {
	if d.my == nil {
		return nil, fmt.Errorf("%w: %s does not run on MariaDB", errSkip, d.Name)
	}
	return d.my(c.t)
}

func (c *myCell) close(context.Context) { _ = c.t.db.Close() }

// nodeStats reads the Galera counters of every node of the list (ok false
// when the server is not Galera). A node that does not answer within 5 s
// is left out: its entry is unknown (-1).
func (e *myEnv) nodeStats(ctx context.Context) ([]nodeCounters, bool) {
	if !e.galera {
		return nil, false
	}
	out := make([]nodeCounters, len(e.causal))
	for i, db := range e.causal {
		out[i] = nodeCounters{certFailures: -1, bfAborts: -1, commits: -1}
		if db == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rows, err := db.QueryContext(cctx, myWsrepStats)
		if err == nil {
			for rows.Next() {
				var k string
				var v int64
				if rows.Scan(&k, &v) != nil {
					continue
				}
				switch k {
				case "wsrep_local_cert_failures":
					out[i].certFailures = v
				case "wsrep_local_bf_aborts":
					out[i].bfAborts = v
				case "wsrep_local_commits":
					out[i].commits = v
				}
			}
			rows.Close()
		}
		cancel()
	}
	return out, true
}
