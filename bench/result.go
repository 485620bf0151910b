package bench

import (
	"fmt"
	"strconv"
	"time"
)

// Key distributions of a Cell.
const (
	DistUniform = "uniform" // uniform over Rows hot rows
	DistZipf    = "zipf"    // Zipfian (θ) over Rows keys
)

// Load modes of a Cell.
const (
	ModeClosed = "closed" // each worker starts its next operation when the last one ends
	ModeOpen   = "open"   // operations arrive at a fixed offered rate, busy or not
)

// Cell statuses.
const (
	StatusOK      = "ok"
	StatusSkipped = "skipped" // could not run here (a server is missing); Reason says why
	StatusError   = "error"   // the cell's setup or run failed; Reason says why
)

// FormatVersion identifies the layout of summary.json and results.csv.
// Fields are only ever added; a change of meaning bumps it.
const FormatVersion = "concurkit-bench/1"

// Cell is one point of the grid: a database, a workload, a strategy, a key
// distribution, a number of workers and a load mode.
type Cell struct {
	DB       string `json:"db"`
	Workload string `json:"workload"`
	// ReadMode is the mixed workload's read mode (ReadPlain, ReadShare);
	// empty for the other workloads.
	ReadMode string `json:"read_mode,omitempty"`
	Strategy string `json:"strategy"`
	// Dist is DistUniform (Rows hot rows) or DistZipf (Theta over Rows keys).
	Dist    string  `json:"dist"`
	Rows    int     `json:"rows"`
	Theta   float64 `json:"theta"`
	Workers int     `json:"workers"`
	// Mode is ModeClosed or ModeOpen.
	Mode string `json:"mode"`
	// RateSpec is the open-loop rate as asked ("500", "x0.9"); Rate the
	// offered ops/s it resolved to.
	RateSpec string  `json:"rate_spec,omitempty"`
	Rate     float64 `json:"rate,omitempty"`
	Arrival  string  `json:"arrival,omitempty"`
}

// ID is the cell's stable identity across runs (what --baseline matches
// on), e.g. "postgres/counter/cas/rows=1/w=8/closed" or
// "mariadb/mixed:share/for-update/zipf=0.99,keys=10000/w=16/open=x0.9".
func (c Cell) ID() string {
	wl := c.Workload
	if c.ReadMode != "" {
		wl += ":" + c.ReadMode
	}
	dist := "rows=" + strconv.Itoa(c.Rows)
	if c.Dist == DistZipf {
		dist = "zipf=" + strconv.FormatFloat(c.Theta, 'g', -1, 64) + ",keys=" + strconv.Itoa(c.Rows)
	}
	mode := ModeClosed
	if c.Mode == ModeOpen {
		mode = "open=" + c.RateSpec
	}
	return fmt.Sprintf("%s/%s/%s/%s/w=%d/%s", c.DB, wl, c.Strategy, dist, c.Workers, mode)
}

// Contention describes the key distribution for tables: "1 row",
// "256 rows", "zipf 0.99/10000".
func (c Cell) Contention() string {
	if c.Dist == DistZipf {
		return "zipf " + strconv.FormatFloat(c.Theta, 'g', -1, 64) + "/" + strconv.Itoa(c.Rows)
	}
	if c.Rows == 1 {
		return "1 row"
	}
	return strconv.Itoa(c.Rows) + " rows"
}

// Latency summarises an HdrHistogram, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// CellResult is a cell's measurements.
type CellResult struct {
	Cell
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`

	// Seconds is the measured window (after the warmup).
	Seconds float64 `json:"seconds"`
	// Ops counts the successful operations that completed in the window
	// (writes committed, refusals, reads); Throughput is Ops per second.
	Ops        int64   `json:"ops"`
	Throughput float64 `json:"throughput"`
	// Committed counts the committed changes, Rejected the refusals (sold
	// out, insufficient funds), Reads the mixed workload's reads, all in the
	// window.
	Committed int64 `json:"committed"`
	Rejected  int64 `json:"rejected"`
	Reads     int64 `json:"reads"`
	// Retries counts retried attempts of the operations started in the
	// window; Aborts counts failed attempts by cause (retried ones and the
	// last attempt of operations that gave up). Per op: divided by the
	// successful operations started in the window.
	Retries      int64            `json:"retries"`
	RetriesPerOp float64          `json:"retries_per_op"`
	Aborts       map[string]int64 `json:"aborts,omitempty"`
	AbortsPerOp  float64          `json:"aborts_per_op"`
	// GaveUp counts operations whose retry budget ran out (nothing
	// written); Failed operations that failed otherwise without writing;
	// Unknown those whose outcome is unknown (the check tolerates them).
	// ErrorSample is the first such error.
	GaveUp        int64  `json:"gave_up"`
	Failed        int64  `json:"failed"`
	Unknown       int64  `json:"unknown"`
	ErrorSample   string `json:"error_sample,omitempty"`
	ReleaseErrors int64  `json:"lock_release_errors,omitempty"`
	// Missed counts open-loop operations still queued when the cell ended
	// (the offered load was beyond capacity); their latency is recorded as
	// a lower bound (end − intended start).
	Missed int64 `json:"missed,omitempty"`

	// AttemptsP99 and AttemptsMax are the attempts per operation (1 + its
	// retries, operations started in the window) at the 99th percentile
	// and the most one operation took: fairness, where RetriesPerOp is a
	// mean that hides a starving writer.
	AttemptsP99 int64 `json:"attempts_p99"`
	AttemptsMax int64 `json:"attempts_max"`
	// SLOLatency is the latency (ms, from the intended start) at the run's
	// SLO percentile, and AboveSLO the share of operations slower than its
	// target (open loop: those still queued at the end included); set when
	// the run has an SLO (Config.SLO).
	SLOLatency *float64 `json:"slo_latency_ms,omitempty"`
	AboveSLO   *float64 `json:"above_slo,omitempty"`

	// Latency is measured from the intended start (open loop: the
	// scheduled arrival, so queueing counts; closed loop: the actual start)
	// to the end; Service from the actual start.
	Latency Latency `json:"latency"`
	Service Latency `json:"service"`

	// TotalCommitted counts every committed change of the cell, warmup and
	// tail included (the denominator of SyncsPerCommit).
	TotalCommitted int64 `json:"total_committed"`
	// Syncs is the server's WAL/log sync counter's increase over the cell
	// (-1 when unknown); SyncsPerCommit divides it by the successful
	// operations of the whole cell. The counter is server-wide: other
	// clients' commits count too.
	Syncs          int64    `json:"syncs"`
	SyncsPerCommit *float64 `json:"syncs_per_commit,omitempty"`
	// CeilingFraction is Throughput divided by the server's durable
	// hot-row ceiling (Server.Ceiling), for hot-row cells (1 row) on a
	// durable server.
	CeilingFraction *float64 `json:"ceiling_fraction,omitempty"`

	// Galera counts the cell's replication conflicts and commits on each
	// node when the database is a MariaDB Galera cluster; nil otherwise.
	Galera *GaleraCell `json:"galera,omitempty"`

	Check Check `json:"check"`
	// Hlog is the cell's HdrHistogram interval log, relative to the output
	// directory.
	Hlog string `json:"hlog,omitempty"`

	hlog []byte
}

// GaleraCell is what a cell did on a Galera cluster: the growth of each
// node's counters over the cell, summed over the nodes of the DSN list.
// The counters are server-wide: other clients of the cluster count too.
type GaleraCell struct {
	// CertFailures (wsrep_local_cert_failures) are local transactions
	// that failed certification at COMMIT — another node committed a
	// conflicting write first — and BFAborts (wsrep_local_bf_aborts)
	// local transactions rolled back mid-flight by such a replicated
	// write; either client got error 1213. Conflicts is their sum.
	CertFailures int64 `json:"cert_failures"`
	BFAborts     int64 `json:"bf_aborts"`
	Conflicts    int64 `json:"conflicts"`
	// NodeConns are the connections the cell opened on each node (in the
	// order of the list); NodeCommits each node's local commits
	// (wsrep_local_commits), -1 where a node did not answer.
	NodeConns   []int64 `json:"node_conns"`
	NodeCommits []int64 `json:"node_commits"`
}

// SyncRate is a measured rate of durable writes.
type SyncRate struct {
	// Method says what was measured.
	Method  string  `json:"method"`
	Path    string  `json:"path,omitempty"`
	Count   int64   `json:"count"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"`
	// P50 is the median time of one sync, in milliseconds.
	P50 float64 `json:"p50_ms"`
}

// Server describes one database server of the run.
type Server struct {
	DB       string            `json:"db"`
	Endpoint string            `json:"endpoint"` // password redacted
	Version  string            `json:"version"`
	Settings map[string]string `json:"settings"`
	// Durable is true when a commit waits for its log to reach the disk
	// (PostgreSQL fsync=on and synchronous_commit on/local/remote_*;
	// MariaDB innodb_flush_log_at_trx_commit=1).
	Durable bool   `json:"durable"`
	DataDir string `json:"data_dir,omitempty"`
	// Disk is an fdatasync loop on a file in the data directory's file
	// system (when the server is local); CommitLoop one connection's
	// single-row commits in a loop.
	Disk       *SyncRate `json:"disk,omitempty"`
	CommitLoop *SyncRate `json:"commit_loop,omitempty"`
	// Ceiling is the physical ceiling of a durable hot row, in commits per
	// second: the disk's sync rate when measured, else the commit loop's
	// rate; zero when the server is not durable or nothing was measured.
	Ceiling       float64 `json:"ceiling"`
	CeilingSource string  `json:"ceiling_source,omitempty"`
	// SyncCounter names the counter behind CellResult.Syncs.
	SyncCounter string `json:"sync_counter,omitempty"`
	Error       string `json:"error,omitempty"`
	// Label names a cluster, "MariaDB Galera (3 nodes)" (its
	// wsrep_cluster_size); empty for a single server.
	Label string `json:"label,omitempty"`
	// ClusterSize is a Galera cluster's wsrep_cluster_size at the start.
	ClusterSize int `json:"cluster_size,omitempty"`
	// Nodes are the DSNs of a list, one per node (passwords redacted),
	// over which each cell's connections were spread; AdminNode (from 1)
	// is the one that ran the setup, the resets and the check's reads.
	Nodes     []string `json:"nodes,omitempty"`
	AdminNode int      `json:"admin_node,omitempty"`
}

// Host describes the machine that ran the clients.
type Host struct {
	Hostname   string `json:"hostname"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	GoVersion  string `json:"go_version"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// Summary is the record of one run: what summary.json holds.
type Summary struct {
	Format     string         `json:"format"`
	RunID      string         `json:"run_id"`
	Started    time.Time      `json:"started"`
	Finished   time.Time      `json:"finished"`
	Args       []string       `json:"args,omitempty"`
	Settings   *Settings      `json:"settings"`
	Host       Host           `json:"host"`
	Servers    []Server       `json:"servers"`
	Strategies []StrategyInfo `json:"strategies"`
	Cells      []CellResult   `json:"cells"`
	Verdicts   []Verdict      `json:"verdicts"`
	Notes      []string       `json:"notes,omitempty"`
	// Baseline compares the run with an earlier one (see Compare); nil
	// without one.
	Baseline *Comparison `json:"baseline,omitempty"`
}

// slo returns the run's latency target, or nil.
func (s *Summary) slo() *SLO {
	if s.Settings == nil {
		return nil
	}
	return s.Settings.SLO
}

// server returns the Server record of db, or nil.
func (s *Summary) server(db string) *Server {
	for i := range s.Servers {
		if s.Servers[i].DB == db {
			return &s.Servers[i]
		}
	}
	return nil
}

// Failed returns the cells whose correctness check FAILED, except those of
// lossy strategies (whose failure is the expected outcome).
func (s *Summary) Failed() []CellResult {
	var out []CellResult
	for _, c := range s.Cells {
		if c.Check.Status == CheckFailed {
			if d := lookupStrategy(c.Strategy); d != nil && d.Kind == KindLossy {
				continue
			}
			out = append(out, c)
		}
	}
	return out
}
