package testkit_test

import (
	"context"
	"database/sql"
	"errors"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concurkit/concurkit/testkit"
)

func currentSchema(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) string {
	t.Helper()
	var s string
	if err := db.QueryRow(t.Context(), "SELECT current_schema()").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	a, b := testkit.Postgres(t), testkit.Postgres(t)
	sa, sb := currentSchema(t, a), currentSchema(t, b)
	if !strings.HasPrefix(sa, "ck_") || !strings.HasPrefix(sb, "ck_") || sa == sb {
		t.Fatalf("schemas %q and %q: want two distinct ck_ schemas", sa, sb)
	}
	if _, err := a.Exec(t.Context(), "CREATE TABLE items (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var reg *string
	if err := b.QueryRow(t.Context(), "SELECT to_regclass('items')::text").Scan(&reg); err != nil {
		t.Fatal(err)
	}
	if reg != nil {
		t.Fatalf("table of schema %s visible from %s as %s", sa, sb, *reg)
	}
	if got := a.Config().MaxConns; got < 80 {
		t.Fatalf("MaxConns = %d, want >= 80", got)
	}
	// 64 goroutines' worth of connections held at once.
	conns := make([]*pgxpool.Conn, 0, 64)
	for range 64 {
		c, err := a.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		if s := currentSchema(t, c); s != sa {
			t.Fatalf("connection in schema %s, want %s", s, sa)
		}
		c.Release()
	}
}

func TestPostgresURLAndPoolFor(t *testing.T) {
	t.Parallel()
	url := testkit.PostgresURL(t)
	p1, p2 := testkit.PostgresPoolFor(t, url), testkit.PostgresPoolFor(t, url)
	conn := testkit.PostgresConn(t, url)
	s := currentSchema(t, p1)
	if !strings.HasPrefix(s, "ck_") || currentSchema(t, p2) != s || currentSchema(t, conn) != s {
		t.Fatalf("schemas %s / %s / %s: want one ck_ schema", s, currentSchema(t, p2), currentSchema(t, conn))
	}
	if _, err := p1.Exec(t.Context(), "CREATE TABLE items (id int); INSERT INTO items VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	var id int
	if err := conn.QueryRow(t.Context(), "SELECT id FROM items").Scan(&id); err != nil || id != 7 {
		t.Fatalf("second connection reads %d, %v; want 7", id, err)
	}
	// Tools such as golang-migrate parse and re-encode the URL's query.
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = u.Query().Encode()
	if got := currentSchema(t, testkit.PostgresConn(t, u.String())); got != s {
		t.Fatalf("re-encoded URL %s lands in schema %q, want %q", u, got, s)
	}
}

func TestPostgresSchemaDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var schema string
	t.Run("inner", func(t *testing.T) {
		pool := testkit.Postgres(t)
		schema = currentSchema(t, pool)
		if _, err := pool.Exec(t.Context(), "CREATE TABLE items (id int)"); err != nil {
			t.Fatal(err)
		}
	})
	conn := testkit.PostgresConn(t, testkit.PostgresServerURL(t))
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if schema == "" || n != 0 {
		t.Fatalf("schema %q: %d left after cleanup, want 0", schema, n)
	}
}

func TestMySQL(t *testing.T) {
	t.Parallel()
	var dbname string
	t.Run("inner", func(t *testing.T) {
		a, b := testkit.MySQL(t), testkit.MySQL(t)
		var na, nb string
		if err := a.QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&na); err != nil {
			t.Fatal(err)
		}
		if err := b.QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&nb); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(na, "ck_") || !strings.HasPrefix(nb, "ck_") || na == nb {
			t.Fatalf("databases %q and %q: want two distinct ck_ databases", na, nb)
		}
		dbname = na
		// multiStatements=true
		if _, err := a.ExecContext(t.Context(), "CREATE TABLE items (id INT PRIMARY KEY, at DATETIME(6)); INSERT INTO items VALUES (1, NOW(6))"); err != nil {
			t.Fatal(err)
		}
		// parseTime=true
		var at time.Time
		if err := a.QueryRowContext(t.Context(), "SELECT at FROM items WHERE id = 1").Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at.IsZero() {
			t.Fatal("zero DATETIME")
		}
		var n int
		if err := b.QueryRowContext(t.Context(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'items'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("table visible from the other database: %d, %v", n, err)
		}
		if got := a.Stats().MaxOpenConnections; got != testkit.MySQLMaxOpenConns {
			t.Fatalf("MaxOpenConnections = %d, want %d", got, testkit.MySQLMaxOpenConns)
		}
		// A second, independent handle on the same database.
		dsn := testkit.MySQLDSN(t)
		c1, c2 := testkit.MySQLFor(t, dsn), testkit.MySQLFor(t, dsn)
		if _, err := c1.ExecContext(t.Context(), "CREATE TABLE x (id INT)"); err != nil {
			t.Fatal(err)
		}
		if _, err := c2.ExecContext(t.Context(), "INSERT INTO x VALUES (1)"); err != nil {
			t.Fatal(err)
		}
	})
	db := testkit.MySQLFor(t, testkit.MySQLServerDSN(t))
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", dbname).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if dbname == "" || n != 0 {
		t.Fatalf("database %q: %d left after cleanup, want 0", dbname, n)
	}
}

func TestRedis(t *testing.T) {
	t.Parallel()
	var key string
	t.Run("inner", func(t *testing.T) {
		c, p1 := testkit.Redis(t)
		_, p2 := testkit.Redis(t)
		if p1 == p2 || p1 == "" {
			t.Fatalf("prefixes %q and %q", p1, p2)
		}
		key = p1 + "k"
		if err := c.Set(t.Context(), key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	c := testkit.RedisClient(t, testkit.RedisAddr(t), "")
	if n, err := c.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Fatalf("key %s: exists=%d err=%v after cleanup, want 0", key, n, err)
	}
}

func TestRedlock(t *testing.T) {
	t.Parallel()
	cs, prefix := testkit.Redlock(t)
	if len(cs) != 5 {
		t.Fatalf("%d clients, want 5", len(cs))
	}
	ids := map[string]bool{}
	for _, c := range cs {
		if err := c.Set(t.Context(), prefix+"k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(t.Context(), "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(info, "\n") {
			if id, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
				ids[id] = true
			}
		}
	}
	if len(ids) != 5 {
		t.Fatalf("%d distinct servers, want 5 independent masters", len(ids))
	}
}

func testZooKeeper(t *testing.T, get func(testing.TB) ([]string, string)) {
	var addrs []string
	var root string
	t.Run("inner", func(t *testing.T) {
		var root2 string
		addrs, root = get(t)
		_, root2 = get(t)
		if root == root2 || !strings.HasPrefix(root, "/ck_") {
			t.Fatalf("roots %q and %q", root, root2)
		}
		c := testkit.ZooKeeperConn(t, addrs)
		if _, err := c.Create(root+"/child", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(root+"/child/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	})
	c := testkit.ZooKeeperConn(t, addrs)
	if ok, _, err := c.Exists(root); err != nil || ok {
		t.Fatalf("znode %s exists=%v err=%v after cleanup, want gone", root, ok, err)
	}
}

func TestZooKeeper(t *testing.T) {
	t.Parallel()
	testZooKeeper(t, testkit.ZooKeeper)
}

func TestZooKeeperEnsemble(t *testing.T) {
	t.Parallel()
	testZooKeeper(t, func(t testing.TB) ([]string, string) {
		addrs, root := testkit.ZooKeeperEnsemble(t)
		if len(addrs) != 3 {
			t.Fatalf("%d addrs, want 3", len(addrs))
		}
		return addrs, root
	})
}

func testEtcd(t *testing.T, get func(testing.TB) (*clientv3.Client, []string, string)) {
	var eps []string
	var key string
	t.Run("inner", func(t *testing.T) {
		c, e, p1 := get(t)
		_, _, p2 := get(t)
		eps = e
		if p1 == p2 || !strings.HasPrefix(p1, "/ck_") {
			t.Fatalf("prefixes %q and %q", p1, p2)
		}
		key = p1 + "k"
		if _, err := c.Put(t.Context(), key, "v"); err != nil {
			t.Fatal(err)
		}
	})
	c := testkit.EtcdClient(t, eps, "")
	resp, err := c.Get(t.Context(), key)
	if err != nil || resp.Count != 0 {
		t.Fatalf("key %s after cleanup: %v, %v; want gone", key, resp, err)
	}
}

func TestEtcd(t *testing.T) {
	t.Parallel()
	testEtcd(t, func(t testing.TB) (*clientv3.Client, []string, string) {
		c, p := testkit.Etcd(t)
		return c, c.Endpoints(), p
	})
}

func TestEtcdCluster(t *testing.T) {
	t.Parallel()
	testEtcd(t, func(t testing.TB) (*clientv3.Client, []string, string) {
		c, eps, p := testkit.EtcdCluster(t)
		m, err := c.MemberList(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Members) != 3 || len(eps) != 3 {
			t.Fatalf("%d members, %d endpoints; want 3 and 3", len(m.Members), len(eps))
		}
		return c, eps, p
	})
}

func TestDynamoDB(t *testing.T) {
	t.Parallel()
	var table string
	t.Run("inner", func(t *testing.T) {
		c, p1 := testkit.DynamoDB(t)
		var p2 string
		_, p2 = testkit.DynamoDB(t)
		if p1 == p2 || !strings.HasPrefix(p1, "ck_") {
			t.Fatalf("prefixes %q and %q", p1, p2)
		}
		table = p1 + "items"
		_, err := c.CreateTable(t.Context(), &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	c := testkit.DynamoDBClient(t, testkit.DynamoDBEndpoint(t))
	_, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("table %s after cleanup: err = %v, want ResourceNotFoundException", table, err)
	}
}

func TestStartRedis(t *testing.T) {
	t.Parallel()
	procs := testkit.StartRedis(t, 2)
	if len(procs) != 2 || procs[0].Addr == procs[1].Addr {
		t.Fatalf("procs %v", testkit.Addrs(procs))
	}
	p := procs[0]
	c := testkit.RedisClient(t, p.Addr, "")
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p.Kill(t)
	if p.Running() {
		t.Fatal("running after Kill")
	}
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("ping succeeded on a killed server")
	}
	p.Start(t)
	if !p.Running() {
		t.Fatal("not running after Start")
	}
	if n, err := c.Exists(t.Context(), "k").Result(); err != nil || n != 0 {
		t.Fatalf("after restart: exists=%d err=%v; want an empty server", n, err)
	}
	if err := testkit.RedisClient(t, procs[1].Addr, "").Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the other server: %v", err)
	}
}

func TestProcFreeze(t *testing.T) {
	t.Parallel()
	p := testkit.StartRedis(t, 1)[0]
	c := testkit.RedisClient(t, p.Addr, "")
	p.Freeze(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("ping of a frozen server succeeded")
	}
	if !p.Running() {
		t.Fatal("a frozen process reported as not running")
	}
	p.Thaw(t)
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("ping after Thaw: %v", err)
	}
}

// TestProcSignalRestart: Signal and Restart do what Freeze, Thaw, Kill and
// Start do, from a goroutine that is not the test's.
func TestProcSignalRestart(t *testing.T) {
	t.Parallel()
	p := testkit.StartRedis(t, 1)[0]
	c := testkit.RedisClient(t, p.Addr, "")
	errs := make(chan error, 1)
	go func() {
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			errs <- err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if c.Ping(ctx).Err() == nil {
			errs <- errors.New("ping of a stopped server succeeded")
			return
		}
		if err := p.Signal(syscall.SIGKILL); err != nil {
			errs <- err
			return
		}
		errs <- p.Restart(t.Context())
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("ping after Restart: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := p.Restart(ctx); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
	p.Kill(t)
	if err := p.Signal(syscall.SIGCONT); err == nil {
		t.Fatal("Signal to a dead server succeeded")
	}
}

func TestStartEtcdCluster(t *testing.T) {
	t.Parallel()
	procs := testkit.StartEtcdCluster(t, 3)
	c := testkit.EtcdClient(t, testkit.Addrs(procs), "")
	m, err := c.MemberList(t.Context())
	if err != nil || len(m.Members) != 3 {
		t.Fatalf("members %v, %v; want 3", m, err)
	}
	if _, err := c.Put(t.Context(), "k", "1"); err != nil {
		t.Fatal(err)
	}
	procs[0].Kill(t)
	// The two others keep a quorum: once they agree on a leader, a write
	// succeeds.
	testkit.WaitEtcdLeader(t, procs)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "2"); err != nil {
		t.Fatal(err)
	}
	procs[0].Start(t)
	one := testkit.EtcdClient(t, []string{procs[0].Addr}, "")
	// A linearizable read on the restarted member sees the write it missed.
	resp, err := one.Get(ctx, "k")
	if err != nil || resp.Count != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Fatalf("restarted member reads %v, %v; want k=2", resp, err)
	}
}

func TestStartZooKeeperEnsemble(t *testing.T) {
	t.Parallel()
	procs := testkit.StartZooKeeperEnsemble(t, 3)
	c := testkit.ZooKeeperConn(t, testkit.Addrs(procs))
	if _, err := c.Create("/a", []byte("1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	procs[2].Kill(t)
	if procs[2].Running() {
		t.Fatal("running after Kill")
	}
	procs[2].Start(t)
	only := testkit.ZooKeeperConn(t, []string{procs[2].Addr})
	if _, err := only.Sync("/a"); err != nil {
		t.Fatal(err)
	}
	data, _, err := only.Get("/a")
	if err != nil || string(data) != "1" {
		t.Fatalf("restarted node reads %q, %v; want 1", data, err)
	}
}

func TestStartZooKeeperStandalone(t *testing.T) {
	t.Parallel()
	procs := testkit.StartZooKeeperEnsemble(t, 1)
	c := testkit.ZooKeeperConn(t, testkit.Addrs(procs))
	if _, err := c.Create("/a", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

func TestName(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := testkit.Name("ck_")
		if len(n) != 19 || seen[n] || strings.ToLower(n) != n {
			t.Fatalf("Name = %q (seen %v)", n, seen[n])
		}
		seen[n] = true
	}
}

// TestNetnsPartition: an etcd cluster in namespaces of its own keeps a
// quorum when one member is cut off, the cut member cannot serve a
// linearizable read, and after Heal it can again.
func TestNetnsPartition(t *testing.T) {
	t.Parallel()
	nn := testkit.StartNetns(t, 3)
	procs := testkit.StartEtcdClusterNetns(t, nn)
	isolated := testkit.EtcdClient(t, []string{procs[2].Addr}, "")
	majority := testkit.EtcdClient(t, []string{procs[0].Addr, procs[1].Addr}, "")
	if err := nn.Partition(2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	testkit.WaitEtcdLeader(t, procs[:2])
	if _, err := majority.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("majority put: %v", err)
	}
	short, cancelShort := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancelShort()
	if _, err := isolated.Get(short, "k"); err == nil {
		t.Fatal("the cut-off member served a linearizable read")
	}
	if err := nn.Heal(); err != nil {
		t.Fatal(err)
	}
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		r, err := isolated.Get(actx, "k")
		acancel()
		if err == nil && len(r.Kvs) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after Heal: %v", err)
		}
	}
}

// TestGalera: the three nodes are one cluster — a table made on one node,
// a row written on another, read on the third (wsrep_sync_wait: the read
// waits for what the cluster committed).
func TestGalera(t *testing.T) {
	t.Parallel()
	dsns := testkit.GaleraDSNs(t)
	if len(dsns) != 3 {
		t.Fatalf("%d Galera nodes, want 3", len(dsns))
	}
	n1, n2, n3 := testkit.MySQLFor(t, dsns[0]), testkit.MySQLFor(t, dsns[1]), testkit.MySQLFor(t, dsns[2])
	var name, size string
	if err := n1.QueryRowContext(t.Context(), "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size); err != nil || size != "3" {
		t.Fatalf("wsrep_cluster_size = %q, %v; want 3", size, err)
	}
	if _, err := n1.ExecContext(t.Context(), "CREATE TABLE items (id int PRIMARY KEY, v int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.ExecContext(t.Context(), "INSERT INTO items VALUES (1, 42)"); err != nil {
		t.Fatal(err)
	}
	conn, err := n3.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var v int
	if _, err := conn.ExecContext(t.Context(), "SET SESSION wsrep_sync_wait = 1"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(t.Context(), "SELECT v FROM items WHERE id = 1").Scan(&v); err != nil || v != 42 {
		t.Fatalf("node 3 read %d, %v: want the 42 node 2 wrote", v, err)
	}
}

// TestPostgresReplicated: the primary streams to a synchronous and an
// asynchronous standby, both read-only, both in the test's schema.
func TestPostgresReplicated(t *testing.T) {
	t.Parallel()
	r := testkit.PostgresReplicated(t)
	primary := testkit.PostgresPoolFor(t, r.Primary)
	rows, err := primary.Query(t.Context(), "SELECT application_name, sync_state FROM pg_stat_replication ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	states, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var app, state string
		err := row.Scan(&app, &state)
		return app + ":" + state, err
	})
	if err != nil || strings.Join(states, " ") != "pgasync:async pgsync:sync" {
		t.Fatalf("pg_stat_replication: %v, %v; want pgasync async and pgsync sync", states, err)
	}
	if _, err := primary.Exec(t.Context(), "CREATE TABLE items (id int PRIMARY KEY); INSERT INTO items VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{r.SyncStandby, r.AsyncStandby} {
		standby := testkit.PostgresConn(t, url)
		var recovering bool
		if err := standby.QueryRow(t.Context(), "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
			t.Fatalf("pg_is_in_recovery() = %v, %v on a standby", recovering, err)
		}
		// Replayed a moment after the commit: poll, bounded.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		var n int
		for n == 0 {
			err := standby.QueryRow(ctx, "SELECT count(*) FROM items").Scan(&n)
			var pgErr interface{ SQLState() string }
			if err != nil && !(errors.As(err, &pgErr) && pgErr.SQLState() == "42P01") { // not replayed yet
				t.Fatalf("standby read: %v", err)
			}
			if n == 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("the row never reached the standby: %v", ctx.Err())
				case <-tick.C:
				}
			}
		}
		tick.Stop()
		cancel()
	}
}

// TestGaleraSpread: the pool's connections land on every node in turn, and
// a node that cannot be reached is skipped rather than failing the open.
func TestGaleraSpread(t *testing.T) {
	t.Parallel()
	dsns := testkit.GaleraDSNs(t)
	db := testkit.Galera(t)
	ports := map[int]int{}
	var conns []*sql.Conn
	for range 6 {
		c, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var port int
		if err := c.QueryRowContext(t.Context(), "SELECT @@port").Scan(&port); err != nil {
			t.Fatal(err)
		}
		ports[port]++
	}
	for _, c := range conns {
		c.Close()
	}
	if len(ports) != 3 {
		t.Errorf("6 connections on ports %v: want 2 on each of the 3 nodes", ports)
	}
	// A dead address first: every connection goes to the one live node.
	cfg := mustParse(t, dsns[0])
	cfg.Addr = "127.0.0.1:1"
	cfg.Timeout = time.Second
	one := testkit.GaleraFor(t, []string{cfg.FormatDSN(), dsns[1]})
	for range 3 {
		c, err := one.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var port int
		if err := c.QueryRowContext(t.Context(), "SELECT @@port").Scan(&port); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if live := mustParse(t, dsns[1]).Addr; !strings.HasSuffix(live, ":"+strconv.Itoa(port)) {
			t.Errorf("connection on port %d, want the live node of %s", port, dsns[1])
		}
	}
}

func mustParse(t *testing.T, dsn string) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestStartPostgresReplication: a commit the synchronous primary
// acknowledged is on the standby, which a promotion makes the primary; the
// killed primary rejoins it as its standby.
func TestStartPostgresReplication(t *testing.T) {
	t.Parallel()
	nodes := testkit.StartPostgresReplication(t, true)
	ctx := t.Context()
	primary := testkit.PostgresConn(t, nodes[0].URL())
	if _, err := primary.Exec(ctx, "CREATE TABLE paid (id int PRIMARY KEY); INSERT INTO paid VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	nodes[0].Kill(t)
	standby := testkit.PostgresConn(t, nodes[1].URL())
	var promoted bool
	if err := standby.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil || !promoted {
		t.Fatalf("pg_promote = %v, %v", promoted, err)
	}
	var n int
	if err := standby.QueryRow(ctx, "SELECT count(*) FROM paid").Scan(&n); err != nil || n != 1 {
		t.Fatalf("promoted standby has %d rows, %v: want the 1 acknowledged", n, err)
	}
	if err := nodes[0].Rejoin(ctx, nodes[1].Addr); err != nil {
		t.Fatal(err)
	}
	if _, err := standby.Exec(ctx, "INSERT INTO paid VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	again := testkit.PostgresConn(t, nodes[0].URL())
	var recovering bool
	if err := again.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
		t.Fatalf("rejoined node: pg_is_in_recovery = %v, %v", recovering, err)
	}
}

// TestStartGalera: writes spread over a 3-node cluster while one node is
// killed and rejoins by state transfer. Every acknowledged write is on
// every node afterwards; nothing is there that was not attempted.
func TestStartGalera(t *testing.T) {
	t.Parallel()
	nodes := testkit.StartGalera(t, 3)
	ctx := t.Context()
	admin := testkit.MySQLFor(t, nodes[0].DSN(""))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE w; CREATE TABLE w.acks (id bigint PRIMARY KEY, writer int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	var dsns []string
	for _, n := range nodes {
		dsns = append(dsns, n.DSN("w"))
	}
	db := testkit.GaleraFor(t, dsns)
	db.SetConnMaxLifetime(200 * time.Millisecond) // connections come back to the rejoined node
	const writers = 6
	var (
		mu           sync.Mutex
		acked, tried = map[int64]bool{}, map[int64]bool{}
		stop         = make(chan struct{})
		wg           sync.WaitGroup
		failures     atomic.Int64
	)
	for w := range writers {
		wg.Go(func() {
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := int64(w)<<32 | i
				mu.Lock()
				tried[id] = true
				mu.Unlock()
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := db.ExecContext(wctx, "INSERT INTO acks VALUES (?, ?)", id, w)
				cancel()
				if err != nil {
					failures.Add(1)
					time.Sleep(10 * time.Millisecond) // back off: not synchronisation
					continue
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitAcked := func(n int) {
		for deadline := time.Now().Add(time.Minute); count() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("only %d writes acknowledged, want %d", count(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	start := time.Now()
	waitAcked(200)
	t.Logf("%s: 200 acknowledged; killing %s", time.Since(start), nodes[2].Name)
	if err := nodes[2].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	before := count()
	waitAcked(before + 200) // the cluster goes on without the node
	t.Logf("%s: %d acknowledged; restarting %s", time.Since(start), count(), nodes[2].Name)
	if err := nodes[2].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s synced again", time.Since(start), nodes[2].Name)
	waitAcked(count() + 200)
	close(stop)
	wg.Wait()
	for _, n := range nodes {
		conn, err := testkit.MySQLFor(t, n.DSN("w")).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.QueryContext(ctx, "SELECT id FROM acks")
		if err != nil {
			t.Fatal(err)
		}
		have := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			have[id] = true
			if !tried[id] {
				t.Errorf("%s: row %d was never written", n.Name, id)
			}
		}
		rows.Close()
		lost := 0
		for id := range acked {
			if !have[id] {
				lost++
			}
		}
		t.Logf("%s: %d rows; %d acknowledged writes, %d failed or ambiguous, %d lost", n.Name, len(have), len(acked), failures.Load(), lost)
		if lost > 0 {
			t.Errorf("%s: %d acknowledged writes lost", n.Name, lost)
		}
	}
}
