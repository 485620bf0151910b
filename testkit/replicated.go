package testkit

import (
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/redact"
	"github.com/concurkit/concurkit/internal/roundrobin"
)

// ReplicatedStartCommand starts the replicated servers, which
// scripts/services.sh never starts by default.
const ReplicatedStartCommand = `scripts/services.sh up --profile replicated && eval "$(scripts/services.sh env)"`

var galeraServer = &server{
	name:   "Galera cluster (" + ReplicatedStartCommand + ")",
	envVar: "CONCURKIT_GALERA_DSNS",
	def:    "root@tcp(127.0.0.1:13311)/,root@tcp(127.0.0.1:13312)/,root@tcp(127.0.0.1:13313)/",
	addrs: func(v string) ([]string, error) {
		var out []string
		for _, dsn := range splitList(v) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return nil, err
			}
			out = append(out, cfg.Addr)
		}
		return out, nil
	},
}

func pgReplicatedServer(role, envVar, port string) *server {
	return &server{
		name:   "PostgreSQL " + role + " (" + ReplicatedStartCommand + ")",
		envVar: envVar,
		def:    "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable",
		addrs:  postgresServer.addrs,
	}
}

var (
	pgPrimaryServer      = pgReplicatedServer("primary", "CONCURKIT_PG_PRIMARY_URL", "15442")
	pgSyncStandbyServer  = pgReplicatedServer("synchronous standby", "CONCURKIT_PG_SYNC_STANDBY_URL", "15443")
	pgAsyncStandbyServer = pgReplicatedServer("asynchronous standby", "CONCURKIT_PG_ASYNC_STANDBY_URL", "15444")
)

// GaleraDSNs creates a fresh database ck_<random> on the Galera cluster
// (its CREATE replicates to every node), dropped at cleanup, and returns
// one DSN per node for it, with parseTime=true and multiStatements=true:
// spread a test's clients over them to write on every node at once. The
// cluster is scripts/services.sh's (`up --profile replicated`) or
// CONCURKIT_GALERA_DSNS, a comma-separated list of one DSN per node.
func GaleraDSNs(t testing.TB) []string {
	t.Helper()
	nodes := splitList(galeraServer.get(t))
	db := Name("ck_")
	out := make([]string, 0, len(nodes))
	for i, base := range nodes {
		cfg, err := mysql.ParseDSN(base)
		if err != nil {
			t.Fatalf("testenv: parse galera dsn %s: %v", redact.DSN(base), redact.Error(err, base))
		}
		cfg.DBName = ""
		if i == 0 {
			admin := cfg.FormatDSN()
			ctx, cancel := setupContext(t)
			err := mysqlExec(ctx, admin, "CREATE DATABASE `"+db+"`")
			cancel()
			if err != nil {
				t.Fatalf("testenv: create database %s: %v", db, redact.Error(err, base, admin))
			}
			t.Cleanup(func() {
				ctx, cancel := cleanupContext()
				defer cancel()
				if err := mysqlExec(ctx, admin, "DROP DATABASE IF EXISTS `"+db+"`"); err != nil {
					t.Logf("testenv: drop database %s: %v", db, redact.Error(err, base, admin))
				}
			})
		}
		if i > 0 {
			// The CREATE reaches every node a moment later: a causal
			// read waits until this node has applied it.
			ctx, cancel := setupContext(t)
			err := mysqlExec(ctx, cfg.FormatDSN(), "SET SESSION wsrep_sync_wait = 1; SELECT COUNT(*) FROM information_schema.schemata")
			cancel()
			if err != nil {
				t.Fatalf("testenv: galera node %s: %v", redact.DSN(base), redact.Error(err, base))
			}
		}
		cfg.DBName = db
		cfg.ParseTime = true
		cfg.MultiStatements = true
		out = append(out, cfg.FormatDSN())
	}
	return out
}

// PostgresReplication is a PostgreSQL primary and its two standbys, as URLs
// whose connections land in one fresh schema (see PostgresReplicated).
type PostgresReplication struct {
	// Primary takes the writes; a commit returns once SyncStandby has
	// flushed it (synchronous_standby_names = 'FIRST 1 (pgsync)').
	Primary string
	// SyncStandby is the synchronous hot standby: what the primary
	// acknowledged is on its disk, though a read there may not see it yet
	// (it is applied a moment later).
	SyncStandby string
	// AsyncStandby is the asynchronous hot standby: it may lag, and lose
	// acknowledged commits if it is promoted.
	AsyncStandby string
}

// PostgresReplicated creates a fresh schema ck_<random> on the primary
// (replicated to both standbys), dropped at cleanup, and returns the URLs
// of the three servers with search_path set to it. The servers are
// scripts/services.sh's (`up --profile replicated`) or
// CONCURKIT_PG_PRIMARY_URL, CONCURKIT_PG_SYNC_STANDBY_URL and
// CONCURKIT_PG_ASYNC_STANDBY_URL.
func PostgresReplicated(t testing.TB) PostgresReplication {
	t.Helper()
	primary := pgPrimaryServer.get(t)
	sync, async := pgSyncStandbyServer.get(t), pgAsyncStandbyServer.get(t)
	schema := newSchema(t, primary)
	return PostgresReplication{
		Primary:      withSearchPath(t, primary, schema),
		SyncStandby:  withSearchPath(t, sync, schema),
		AsyncStandby: withSearchPath(t, async, schema),
	}
}

// Galera returns a *sql.DB on a fresh database (see GaleraDSNs) whose
// connections are spread over the cluster's nodes: see GaleraFor.
func Galera(t testing.TB) *sql.DB {
	t.Helper()
	return GaleraFor(t, GaleraDSNs(t))
}

// GaleraFor returns one *sql.DB over several nodes, one DSN each, as a
// round-robin proxy in front of a multi-primary cluster would: each new
// connection goes to the next node in turn (a node that refuses it is
// skipped for the next one), so a pool's concurrent clients write on every
// node at once. SetMaxOpenConns(MySQLMaxOpenConns), closed at cleanup.
func GaleraFor(t testing.TB, dsns []string) *sql.DB {
	t.Helper()
	if len(dsns) == 0 {
		t.Fatal("testenv: GaleraFor: no DSN")
	}
	var nodes []driver.Connector
	for _, dsn := range dsns {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("testenv: parse galera dsn %s: %v", redact.DSN(dsn), redact.Error(err, dsn))
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatalf("testenv: galera connector %s: %v", redact.DSN(dsn), redact.Error(err, dsn))
		}
		nodes = append(nodes, c)
	}
	db := sql.OpenDB(roundrobin.New(nodes...))
	db.SetMaxOpenConns(MySQLMaxOpenConns)
	db.SetMaxIdleConns(MySQLMaxOpenConns)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := setupContext(t)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("testenv: galera ping: %v", redact.Error(err, dsns...))
	}
	return db
}
