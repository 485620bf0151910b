package bench_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/bench"
	"github.com/concurkit/concurkit/internal/redact"
	"github.com/concurkit/concurkit/testkit"
)

// servers returns the endpoints of the test servers (skip, or fail under
// CI, when missing) and a schema name of the test's own.
func servers(t *testing.T) (pgURL, myDSN, redisAddr string, etcd []string, schema string) {
	t.Helper()
	pgURL, myDSN, redisAddr = testkit.PostgresServerURL(t), testkit.MySQLServerDSN(t), testkit.RedisAddr(t)
	c, _ := testkit.Etcd(t)
	return pgURL, myDSN, redisAddr, c.Endpoints(), testkit.Name("ck_bench_")
}

// tiny is a grid of a few seconds.
func tiny(pgURL, myDSN, redisAddr string, etcd []string, schema string) *bench.Config {
	return &bench.Config{
		PostgresURL: pgURL, MySQLDSN: myDSN, RedisAddr: redisAddr, EtcdEndpoints: etcd, Schema: schema,
		Grid: bench.GridFast, Rows: []int{1}, Workers: []int{4},
		Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, SyncProbe: -1,
		Interval: 50 * time.Millisecond,
	}
}

// TestRunTinyGrid runs a tiny grid on both databases — every strategy on the
// counter, the other workloads with cas, for-update and the hot-row
// strategies (combine skips transfer, transfer-batch runs it alone, sharded
// takes counter and inventory, adaptive runs all four), one
// open-loop cell —
// and checks the files it writes, the correctness verdicts (the lossy
// strategy FAILED on the contended cell, every other cell PASSED) and that
// nothing is left behind.
func TestRunTinyGrid(t *testing.T) {
	pgURL, myDSN, redisAddr, etcd, schema := servers(t)
	ctx := t.Context()

	cfg := tiny(pgURL, myDSN, redisAddr, etcd, schema)
	cfg.Strategies = allStrategies()
	cfg.Rates = []bench.Rate{{OfMax: 0.5}, {OfMax: 1}} // two points: a latency-vs-load plot
	cfg.OpenStrategies = []string{"for-update"}
	cfg.SLO = &bench.SLO{Percentile: 99, Latency: 10 * time.Second}
	var progress []bench.Progress
	cfg.Progress = func(p bench.Progress) { progress = append(progress, p) }
	// The other workloads run at the same time, in a schema of their own.
	schema2 := schema + "_2"
	cfg2 := tiny(pgURL, myDSN, redisAddr, etcd, schema2)
	cfg2.Workloads = []string{bench.Inventory, bench.Transfer, bench.Mixed}
	cfg2.Strategies = []string{"cas", "for-update", "escrow", "combine", "transfer-batch", "sharded", "adaptive"}
	cfg2.Rates = []bench.Rate{}
	cfg2.Stock = 20 // sells out within the cell: "sold out" must be a result
	var sum2 *bench.Summary
	var err2 error
	done := make(chan struct{})
	go func() { defer close(done); sum2, err2 = bench.Run(ctx, cfg2) }()
	sum, err := bench.Run(ctx, cfg)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if err2 != nil {
		t.Fatal(err2)
	}
	sum.Cells = append(sum.Cells, sum2.Cells...)

	if last := progress[len(progress)-1]; last.Done != last.Total || last.Total == 0 {
		t.Errorf("last progress %+v", last)
	}
	lossyFailed := map[string]bool{}
	soldOut, sellsOut := map[string]bool{}, map[string]bool{}
	ran := map[string]bool{}
	for _, c := range sum.Cells {
		ran[c.DB+"/"+c.Strategy+"/"+c.Workload] = true
		if c.Status != bench.StatusOK {
			t.Errorf("%s: %s: %s", c.ID, c.Status, c.Reason)
			continue
		}
		switch {
		case c.Strategy == "lossy":
			if c.Check.Status == bench.CheckFailed {
				lossyFailed[c.DB] = true
			}
		case c.Check.Status != bench.CheckPassed:
			t.Errorf("%s: check %s: %s", c.ID, c.Check.Status, c.Check.Detail)
		}
		// Random-order transfers on a hot pair deadlock, and PostgreSQL
		// detects a deadlock after deadlock_timeout (1 s): a 300 ms cell may
		// see no operation end.
		// An open-loop cell offered a rate set from a loaded machine's
		// maximum may expect under one arrival in its window: operations
		// are required where at least 5 were due.
		// Arrivals still queued half a window after it are counted as
		// missed, with a latency and no attempt: a cell stalled that long
		// by a loaded machine (CI's -race run) may have nothing else, and
		// then says so in Missed.
		due := c.Mode != bench.ModeOpen || c.Rate*c.Seconds >= 5
		started := c.Latency.Count - c.Missed
		if c.Workload != bench.Transfer && (c.Latency.Count == 0 || due && c.Ops == 0 && started > 0) {
			t.Errorf("%s: no operations (%d) or latencies (%d, %d missed) at %.1f/s over %.2f s: %s", c.ID, c.Ops, c.Latency.Count, c.Missed, c.Rate, c.Seconds, c.ErrorSample)
		}
		// More operations in the window than the stock: all but 20 at
		// most were refusals, however slow the machine made the warmup.
		if c.Workload == bench.Inventory {
			soldOut[c.DB] = soldOut[c.DB] || c.Rejected > 0
			if c.Ops > cfg2.Stock {
				sellsOut[c.DB] = true
				if c.Rejected < c.Ops-cfg2.Stock {
					t.Errorf("%s: %d operations, %d refused, on a stock of %d", c.ID, c.Ops, c.Rejected, cfg2.Stock)
				}
			}
		}
		// Fairness and the SLO columns: every cell with operations has
		// attempts per operation; only the first run has an SLO.
		if started > 0 && (c.AttemptsP99 < 1 || c.AttemptsMax < c.AttemptsP99) {
			t.Errorf("%s: attempts p99 %d, max %d (%d latencies, %d missed)", c.ID, c.AttemptsP99, c.AttemptsMax, c.Latency.Count, c.Missed)
		}
		if hasSLO := c.Workload == bench.Counter; hasSLO != (c.SLOLatency != nil && c.AboveSLO != nil) {
			t.Errorf("%s: SLO latency %v, above %v; the run has an SLO: %v", c.ID, c.SLOLatency, c.AboveSLO, hasSLO)
		} else if hasSLO && (*c.AboveSLO < 0 || *c.AboveSLO > 1 || c.Latency.Count > 0 && *c.SLOLatency < c.Latency.P50) {
			t.Errorf("%s: SLO latency %v ms (p50 %v), above %v", c.ID, *c.SLOLatency, c.Latency.P50, *c.AboveSLO)
		}
		if c.Mode == bench.ModeOpen && c.Rate <= 0 {
			t.Errorf("%s: open-loop rate %v not resolved", c.ID, c.Rate)
		}
	}
	for _, db := range []string{bench.Postgres, bench.MariaDB} {
		for _, c := range []string{"combine/counter", "combine/inventory", "escrow/inventory", "escrow/transfer", "transfer-batch/transfer", "sharded/counter", "sharded/inventory", "adaptive/counter", "adaptive/inventory", "adaptive/transfer", "adaptive/mixed"} {
			if !ran[db+"/"+c] {
				t.Errorf("%s: no %s cell", db, c)
			}
		}
		for _, c := range []string{"combine/transfer", "transfer-batch/counter", "transfer-batch/inventory", "sharded/transfer", "sharded/mixed"} {
			if ran[db+"/"+c] {
				t.Errorf("%s: a %s cell, which the strategy does not run", db, c)
			}
		}
		if !lossyFailed[db] {
			t.Errorf("%s: the lossy strategy was not reported FAILED on 1 row × 4 workers", db)
		}
		if sellsOut[db] && !soldOut[db] {
			t.Errorf("%s: inventory never sold out with a stock of 20", db)
		}
		if !sellsOut[db] {
			t.Logf("%s: no inventory cell ran more operations than its stock of 20 in the window (a loaded machine): sold-out not exercised", db)
		}
	}
	if f := sum.Failed(); len(f) != 0 {
		t.Errorf("Failed() = %d cells", len(f))
	}
	if len(sum.Servers) != 2 || sum.Servers[0].Version == "" || sum.Host.GOMAXPROCS == 0 {
		t.Errorf("header: servers %+v host %+v", sum.Servers, sum.Host)
	}
	for _, srv := range sum.Servers {
		// The test DSN does not set interpolateParams: the benchmark turns
		// it on (no prepare round trip per statement) and says so.
		if srv.DB == bench.MariaDB && srv.Settings["client:interpolateParams"] != "true" {
			t.Errorf("mariadb header: client:interpolateParams = %q; want true", srv.Settings["client:interpolateParams"])
		}
	}
	if len(sum.Verdicts) == 0 {
		t.Error("no verdicts")
	}
	for _, v := range sum.Verdicts {
		if v.Workload == bench.Counter && !slices.ContainsFunc(v.Lines, func(l string) bool { return strings.HasPrefix(l, "SLO p99=10s at ") }) {
			t.Errorf("%s/%s verdict has no SLO line:\n%s", v.DB, v.Workload, strings.Join(v.Lines, "\n"))
		}
	}

	dir := t.TempDir()
	files, err := sum.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, files, len(sum.Cells))
	var table bytes.Buffer
	if err := sum.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "FAILED") || !strings.Contains(table.String(), "Verdict postgres / counter") {
		t.Errorf("table:\n%s", table.String())
	}
	assertSchemaGone(t, pgURL, myDSN, schema)
	assertSchemaGone(t, pgURL, myDSN, schema2)
}

// TestRunGalera runs for-update, cas and single-update on one hot row with
// six workers whose connections are spread over the three nodes of the
// Galera cluster (one DSN each), and checks that every cell's correctness
// check passed — the losers of certification got 1213 and were retried,
// nothing lost — that each node took connections and commits, that the
// nodes' certification conflicts are reported (for-update on one hot row
// across nodes must meet some) and that the verdict says so with them.
func TestRunGalera(t *testing.T) {
	dsns := testkit.GaleraDSNs(t)
	cfg, err := mysql.ParseDSN(dsns[0])
	if err != nil {
		t.Fatal(err)
	}
	sum, err := bench.Run(t.Context(), &bench.Config{
		DBs: []string{bench.MariaDB}, MySQLDSN: strings.Join(dsns, ","), Schema: cfg.DBName,
		Grid: bench.GridFast, Strategies: []string{"for-update", "cas", "single-update"}, Rows: []int{1}, Workers: []int{6},
		Rates: []bench.Rate{}, Duration: time.Second, Warmup: 50 * time.Millisecond, SyncProbe: -1, Interval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Servers) != 1 || sum.Servers[0].Label != "MariaDB Galera (3 nodes)" || len(sum.Servers[0].Nodes) != 3 {
		t.Errorf("server: %+v", sum.Servers)
	}
	if len(sum.Cells) != 3 {
		t.Fatalf("%d cells", len(sum.Cells))
	}
	// One node may win most certifications in a cell; over the three
	// cells every node commits.
	commits := make([]int64, 3)
	for _, c := range sum.Cells {
		if c.Status != bench.StatusOK || c.Check.Status != bench.CheckPassed {
			t.Errorf("%s: %s %s, check %s: %s", c.ID, c.Status, c.Reason, c.Check.Status, c.Check.Detail)
			continue
		}
		g := c.Galera
		if g == nil {
			t.Errorf("%s: no Galera counters", c.ID)
			continue
		}
		t.Logf("%s: %.0f ops/s, %.2f retries/op, %d conflicts (%d certification failures, %d BF aborts), connections %v, commits %v, unknown %d",
			c.ID, c.Throughput, c.RetriesPerOp, g.Conflicts, g.CertFailures, g.BFAborts, g.NodeConns, g.NodeCommits, c.Unknown)
		if len(g.NodeConns) != 3 || slices.Contains(g.NodeConns, 0) || len(g.NodeCommits) != 3 {
			t.Errorf("%s: connections %v, commits %v by node: want connections on each of the 3", c.ID, g.NodeConns, g.NodeCommits)
			continue
		}
		for i, n := range g.NodeCommits {
			commits[i] += n
		}
		if c.Strategy == "for-update" && (g.Conflicts <= 0 || g.Conflicts != g.CertFailures+g.BFAborts) {
			t.Errorf("%s: %d conflicts (%d + %d): for-update on one hot row over three nodes must meet some", c.ID, g.Conflicts, g.CertFailures, g.BFAborts)
		}
	}
	if slices.ContainsFunc(commits, func(n int64) bool { return n <= 0 }) {
		t.Errorf("commits by node over the cells: %v, want some on each", commits)
	}
	if len(sum.Verdicts) != 1 || !slices.ContainsFunc(sum.Verdicts[0].Lines, func(l string) bool {
		return strings.HasPrefix(l, "On MariaDB Galera (3 nodes) FOR UPDATE does not wait across nodes: at 1 row × 6 workers, connections on 3 nodes, for-update met ")
	}) {
		t.Errorf("verdicts: %+v", sum.Verdicts)
	}
	dir := t.TempDir()
	if _, err := sum.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, bench.FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "MariaDB Galera (3 nodes), clients spread over `") || !strings.Contains(string(md), "| cert fail | commits by node |") {
		t.Errorf("results.md lacks the cluster:\n%s", md)
	}
	f, err := os.Open(filepath.Join(dir, bench.FileCSV))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 4 {
		t.Fatalf("results.csv: %d rows, %v", len(rows), err)
	}
	col := slices.Index(rows[0], "galera_conflicts")
	if col < 0 || rows[1][col] == "" || rows[1][col+3] != "2;2;2" {
		t.Errorf("results.csv: galera columns %v of %v", rows[1][max(col, 0):], rows[0])
	}
}

// checkFiles parses what WriteFiles wrote.
func checkFiles(t *testing.T, dir string, files []string, cells int) {
	t.Helper()
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rows, err := csv.NewReader(bytes.NewReader(read(bench.FileCSV))).ReadAll()
	if err != nil {
		t.Fatalf("results.csv: %v", err)
	}
	if len(rows) != cells+1 || rows[0][0] != "run_id" || len(rows[1]) != len(rows[0]) {
		t.Errorf("results.csv: %d rows, header %v", len(rows), rows[0])
	}
	var js bench.Summary
	if err := json.Unmarshal(read(bench.FileSummary), &js); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if js.Format != bench.FormatVersion || len(js.Cells) != cells {
		t.Errorf("summary.json: format %q, %d cells", js.Format, len(js.Cells))
	}
	if _, err := bench.LoadSummary(filepath.Join(dir, bench.FileSummary)); err != nil {
		t.Error(err)
	}
	if md := string(read(bench.FileMarkdown)); !strings.Contains(md, "## Verdicts") || !strings.Contains(md, "| db | workload |") {
		t.Errorf("results.md lacks its sections")
	}
	var plots, hlogs int
	for _, f := range files {
		switch {
		case strings.HasPrefix(f, bench.DirPlots+"/"):
			plots++
			if b := read(f); !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("%s is not a PNG", f)
			}
		case strings.HasPrefix(f, bench.DirHlog+"/"):
			hlogs++
			r := hdr.NewHistogramLogReader(bytes.NewReader(read(f)))
			var n int64
			for {
				h, err := r.NextIntervalHistogram()
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if h == nil {
					break
				}
				n += h.TotalCount()
			}
			if n == 0 && !strings.Contains(f, "transfer") {
				t.Errorf("%s: no values", f)
			}
		}
	}
	if plots == 0 || hlogs != cells {
		t.Errorf("%d plots, %d hlog files for %d cells", plots, hlogs, cells)
	}
}

func assertSchemaGone(t *testing.T, pgURL, myDSN, schema string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	if pgURL != "" {
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("postgres schema %s left behind", schema)
		}
	}
	if myDSN != "" {
		db, err := sql.Open("mysql", myDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("mariadb database %s left behind", schema)
		}
	}
}

// TestSecondPostgres points the benchmark at a second PostgreSQL instance
// given by CONCURKIT_BENCH_POSTGRES2_URL (the machine's own durable server,
// say; by default the project's server again, through its own URL) and
// checks that it works there and leaves nothing behind.
func TestSecondPostgres(t *testing.T) {
	url := os.Getenv("CONCURKIT_BENCH_POSTGRES2_URL")
	if url == "" {
		url = testkit.PostgresServerURL(t)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("second PostgreSQL %s unreachable: %v", redact.DSN(url), err)
	}
	conn.Close(ctx)
	schema := testkit.Name("ck_bench2_")
	cfg := tiny(url, "", "", nil, schema)
	cfg.DBs = []string{bench.Postgres}
	cfg.Strategies = []string{"cas", "single-update"}
	cfg.Rates = []bench.Rate{}
	cfg.SyncProbe = 100 * time.Millisecond // measure the ceiling once
	sum, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sum.Cells {
		if c.Status != bench.StatusOK || c.Check.Status != bench.CheckPassed {
			t.Errorf("%s: %s %s %s", c.ID, c.Status, c.Reason, c.Check.Detail)
		}
	}
	srv := sum.Servers[0]
	if srv.CommitLoop == nil || srv.CommitLoop.PerSec <= 0 {
		t.Errorf("no commit-loop rate: %+v", srv)
	}
	if srv.Durable && srv.Ceiling <= 0 {
		t.Errorf("durable server without a ceiling: %+v", srv)
	}
	assertSchemaGone(t, url, "", schema)
}

// TestRunRefusesForeignSchema: the benchmark never drops a schema holding
// tables it did not create.
func TestRunRefusesForeignSchema(t *testing.T) {
	pgURL := testkit.PostgresServerURL(t)
	ctx := t.Context()
	schema := testkit.Name("ck_bench_foreign_")
	conn := testkit.PostgresConn(t, pgURL)
	q := pgx.Identifier{schema}.Sanitize()
	for _, s := range []string{"CREATE SCHEMA " + q, "CREATE TABLE " + q + ".orders (id int)"} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+q+" CASCADE") })
	cfg := tiny(pgURL, "", "", nil, schema)
	cfg.DBs = []string{bench.Postgres}
	cfg.Strategies = []string{"single-update"}
	_, err := bench.Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), `"orders"`) {
		t.Fatalf("Run on a foreign schema: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'orders'", schema).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the foreign table is gone (%d, %v)", n, err)
	}
}

// TestRunCancelled: a cancelled run returns promptly with ctx's error, the
// cells measured so far, and drops its schema.
func TestRunCancelled(t *testing.T) {
	pgURL := testkit.PostgresServerURL(t)
	schema := testkit.Name("ck_bench_cancel_")
	ctx, cancel := context.WithCancel(t.Context())
	cfg := tiny(pgURL, "", "", nil, schema)
	cfg.DBs = []string{bench.Postgres}
	cfg.Strategies = []string{"for-update", "single-update"}
	cfg.Duration = time.Minute
	cfg.Progress = func(p bench.Progress) {
		if p.Done == 0 {
			go func() { time.Sleep(300 * time.Millisecond); cancel() }()
		}
	}
	start := time.Now()
	sum, err := bench.Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) || sum == nil {
		t.Fatalf("Run = %v, %v", sum, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("cancelled run took %v", d)
	}
	assertSchemaGone(t, pgURL, "", schema)
}

// allStrategies names every strategy, hidden ones included.
func allStrategies() []string {
	var out []string
	for _, s := range bench.Strategies() {
		out = append(out, s.Name)
	}
	return out
}
