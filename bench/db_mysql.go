package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/redact"
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
		"'innodb_buffer_pool_size', 'innodb_lock_wait_timeout', 'version_comment')"
	myProbeUpdate = "UPDATE %s.%s SET v = v + 1 WHERE id = 1"
)

// myFillBatch rows are inserted per statement.
const myFillBatch = 1000

type myEnv struct {
	s       *Settings
	admin   *sql.DB // no default database
	cfg     *mysql.Config
	schema  string // quoted
	locks   *lockClients
	prefix  string
	counter string // the fsync status variable, "" if none
}

func myQuote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func openMariaDB(ctx context.Context, s *Settings, locks *lockClients, runID string) (*myEnv, error) {
	cfg, err := mysql.ParseDSN(s.mysqlDSN)
	if err != nil {
		return nil, fmt.Errorf("bench: mysql DSN: %w", redact.Error(err, s.mysqlDSN))
	}
	cfg.DBName = ""
	if !strings.Contains(s.mysqlDSN, "interpolateParams=") {
		// What concurkit recommends: without it go-sql-driver prepares
		// every statement with parameters on the server, a round trip of
		// its own (the hot-row CAS ran at 0.68× FOR UPDATE without it,
		// ≥1.0× with it). A DSN that sets it either way is measured as is.
		cfg.InterpolateParams = true
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: mysql DSN: %w", redact.Error(err, s.mysqlDSN))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(2)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(cctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bench: mariadb %s: %w", redact.DSN(s.mysqlDSN), redact.Error(err, s.mysqlDSN))
	}
	return &myEnv{s: s, admin: db, cfg: cfg, schema: myQuote(s.Schema), locks: locks, prefix: runID + "/mariadb/"}, nil
}

func (e *myEnv) close() { _ = e.admin.Close() }

// dbFor returns a pool whose default database is the benchmark's.
func (e *myEnv) dbFor(conns int) (*sql.DB, error) {
	cfg := e.cfg.Clone()
	cfg.DBName = e.s.Schema
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
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
	db, err := e.dbFor(1)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := myCreateTokenSequence(ctx, db); err != nil {
		return err
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
	srv := Server{DB: MariaDB, Endpoint: redact.DSN(e.s.mysqlDSN), Settings: map[string]string{}}
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
	db, err := e.dbFor(workers + spareConns)
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
		return nil, redact.Error(err, e.s.mysqlDSN)
	}
	return &myCell{t: &myTarget{db: db, table: table, readMode: readMode, locks: e.locks, lockPrefix: e.prefix}}, nil
}

type myCell struct{ t *myTarget }

func (c *myCell) executor(d *strategyDef) (executor, error) {
	if d.my == nil {
		return nil, fmt.Errorf("%w: %s does not run on MariaDB", errSkip, d.Name)
	}
	return d.my(c.t)
}

func (c *myCell) close(context.Context) { _ = c.t.db.Close() }
