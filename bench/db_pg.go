package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/redact"
)

// PostgreSQL statements of the benchmark's own housekeeping.
const (
	pgForeignTables = `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`
	pgCreateSchema  = `CREATE SCHEMA IF NOT EXISTS %s`
	pgCreateTable   = `CREATE TABLE IF NOT EXISTS %s.%s ` + tableColumns
	pgDropSchema    = `DROP SCHEMA IF EXISTS %s CASCADE`
	pgTruncate      = `TRUNCATE %s.%s`
	pgFill          = `INSERT INTO %s.%s (id, v) SELECT g, $1 FROM generate_series(1, $2::bigint) AS g`
	pgReadAll       = `SELECT id, v, w FROM %s.%s`
	pgWALSyncs      = `SELECT wal_sync FROM pg_stat_wal`
	pgSessions      = `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`
	pgSettings      = `SELECT name, setting FROM pg_settings WHERE name = ANY($1)`
	pgVersion       = `SELECT version()`
	pgProbeUpdate   = `UPDATE %s.%s SET v = v + 1 WHERE id = 1`
)

// pgSettingNames are recorded in the header.
var pgSettingNames = []string{
	"server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
	"commit_delay", "wal_level", "max_connections", "shared_buffers", "data_directory",
	"default_transaction_isolation", "deadlock_timeout",
}

type pgEnv struct {
	s      *Settings
	admin  *pgx.Conn
	schema string // quoted
	app    string // application_name of the cells' connections
	locks  *lockClients
	prefix string // lock key prefix
}

func openPostgres(ctx context.Context, s *Settings, locks *lockClients, runID string) (*pgEnv, error) {
	cfg, err := pgx.ParseConfig(s.postgresURL)
	if err != nil {
		return nil, fmt.Errorf("bench: postgres URL: %w", redact.Error(err, s.postgresURL))
	}
	cfg.RuntimeParams["application_name"] = "concurkit-bench-admin"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: postgres %s: %w", redact.DSN(s.postgresURL), redact.Error(err, s.postgresURL))
	}
	return &pgEnv{
		s: s, admin: conn, schema: pgx.Identifier{s.Schema}.Sanitize(),
		app: "concurkit-bench-" + runID, locks: locks, prefix: runID + "/postgres/",
	}, nil
}

func (e *pgEnv) close() { _ = e.admin.Close(context.Background()) }

func (e *pgEnv) claim(ctx context.Context) error {
	rows, err := e.admin.Query(ctx, pgForeignTables, e.s.Schema)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		if !slices.Contains(benchTables, n) {
			return fmt.Errorf("bench: postgres schema %s holds table %q, which the benchmark did not create: choose another schema", e.s.Schema, n)
		}
	}
	return nil
}

func (e *pgEnv) setup(ctx context.Context) error {
	if _, err := e.admin.Exec(ctx, fmt.Sprintf(pgCreateSchema, e.schema)); err != nil {
		return err
	}
	for _, t := range benchTables {
		if _, err := e.admin.Exec(ctx, fmt.Sprintf(pgCreateTable, e.schema, pgx.Identifier{t}.Sanitize())); err != nil {
			return err
		}
	}
	if err := pgCreateTokenSequence(ctx, e.admin, e.s.Schema); err != nil {
		return err
	}
	return e.reset(ctx, tableSyncProbe, 1, 0)
}

func (e *pgEnv) drop(ctx context.Context) error {
	conn := e.admin
	if conn.IsClosed() {
		// pgx closes a connection whose query was cancelled: a run
		// cancelled during setup or a reset drops its schema on another.
		c, err := pgx.ConnectConfig(ctx, e.admin.Config())
		if err != nil {
			return err
		}
		defer c.Close(context.WithoutCancel(ctx))
		conn = c
	}
	_, err := conn.Exec(ctx, fmt.Sprintf(pgDropSchema, e.schema))
	return err
}

func (e *pgEnv) reset(ctx context.Context, table string, n int, initV int64) error {
	t := pgx.Identifier{table}.Sanitize()
	if _, err := e.admin.Exec(ctx, fmt.Sprintf(pgTruncate, e.schema, t)); err != nil {
		return err
	}
	_, err := e.admin.Exec(ctx, fmt.Sprintf(pgFill, e.schema, t), initV, n)
	return err
}

func (e *pgEnv) syncs(ctx context.Context) (int64, bool) {
	var n int64
	if err := e.admin.QueryRow(ctx, pgWALSyncs).Scan(&n); err != nil {
		return -1, false
	}
	return n, true
}

func (e *pgEnv) rows(ctx context.Context, table string) (map[int64]rowState, error) {
	rows, err := e.admin.Query(ctx, fmt.Sprintf(pgReadAll, e.schema, pgx.Identifier{table}.Sanitize()))
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

func (e *pgEnv) info(ctx context.Context, probe time.Duration) Server {
	srv := Server{DB: Postgres, Endpoint: redact.DSN(e.s.postgresURL), Settings: map[string]string{}, SyncCounter: "pg_stat_wal.wal_sync"}
	if err := e.admin.QueryRow(ctx, pgVersion).Scan(&srv.Version); err != nil {
		srv.Error = err.Error()
		return srv
	}
	rows, err := e.admin.Query(ctx, pgSettings, pgSettingNames)
	if err == nil {
		for rows.Next() {
			var k, v string
			if rows.Scan(&k, &v) == nil {
				srv.Settings[k] = v
			}
		}
		rows.Close()
	}
	srv.Durable = srv.Settings["fsync"] == "on" && srv.Settings["synchronous_commit"] != "off"
	srv.DataDir = srv.Settings["data_directory"] // superusers and pg_read_all_settings only
	if _, ok := e.syncs(ctx); !ok {
		srv.SyncCounter = ""
	}
	if probe <= 0 {
		return srv
	}
	host := e.admin.Config().Host
	if srv.DataDir != "" && isLoopback(host) {
		if _, err := os.Stat(srv.DataDir); err == nil {
			if r, err := diskSync(ctx, srv.DataDir, probe); err == nil {
				srv.Disk = r
			}
		}
	}
	q := fmt.Sprintf(pgProbeUpdate, e.schema, pgx.Identifier{tableSyncProbe}.Sanitize())
	if r, err := timedLoop(ctx, "single-row UPDATE commits, one connection", "", probe, func() error {
		_, err := e.admin.Exec(ctx, q)
		return err
	}); err == nil {
		srv.CommitLoop = r
	}
	setCeiling(&srv)
	return srv
}

// setCeiling picks the hot-row ceiling of a durable server: the disk's
// sync rate (the physical limit: a row lock is held until the commit's
// flush), else the commit loop's rate.
func setCeiling(srv *Server) {
	if !srv.Durable {
		return
	}
	switch {
	case srv.Disk != nil && srv.Disk.PerSec > 0:
		srv.Ceiling, srv.CeilingSource = srv.Disk.PerSec, "disk fdatasync loop"
	case srv.CommitLoop != nil && srv.CommitLoop.PerSec > 0:
		srv.Ceiling, srv.CeilingSource = srv.CommitLoop.PerSec, "single-row commit loop"
	}
}

// maxConnections returns the server's max_connections (0 if unknown).
func (e *pgEnv) nodeStats(context.Context) ([]nodeCounters, bool) { return nil, false }

func (e *pgEnv) maxConnections(ctx context.Context) int {
	var v int
	_ = e.admin.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&v)
	return v
}

func (e *pgEnv) open(ctx context.Context, workers int, table, readMode string) (cellDB, error) {
	cfg, err := pgxpool.ParseConfig(e.s.postgresURL)
	if err != nil {
		return nil, redact.Error(err, e.s.postgresURL)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = e.s.Schema
	cfg.ConnConfig.RuntimeParams["application_name"] = e.app
	cfg.MaxConns = int32(workers + spareConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, redact.Error(err, e.s.postgresURL)
	}
	// Open every worker's connection before the clock starts.
	conns := make([]*pgxpool.Conn, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	if err := errors.Join(errs...); err != nil {
		pool.Close()
		return nil, redact.Error(err, e.s.postgresURL)
	}
	return &pgCell{env: e, t: &pgTarget{pool: pool, table: table, readMode: readMode, locks: e.locks, lockPrefix: e.prefix}}, nil
}

type pgCell struct {
	env *pgEnv
	t   *pgTarget
}

func (c *pgCell) nodeConns() []int64 { return nil }

func (c *pgCell) executor(d *strategyDef) (executor, error) {
	if d.pg == nil {
		return nil, fmt.Errorf("%w: %s does not run on PostgreSQL", errSkip, d.Name)
	}
	return d.pg(c.t)
}

func (c *pgCell) close(ctx context.Context) {
	c.t.pool.Close()
	// Backends publish their WAL statistics when they exit: wait for them.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		if err := c.env.admin.QueryRow(ctx, pgSessions, c.env.app).Scan(&n); err != nil || n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
