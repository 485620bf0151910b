package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/redact"
)

// Database names accepted in Config.DBs.
const (
	Postgres = "postgres"
	MariaDB  = "mariadb"
)

// Workload names accepted in Config.Workloads.
const (
	// Counter increments one integer (read-modify-write of a row).
	Counter = "counter"
	// Inventory sells one unit: decrement with a floor at 0; "sold out" is
	// a result, not an error.
	Inventory = "inventory"
	// Transfer moves money between two accounts touched in random order,
	// the deadlock-prone shape; an overdraft is refused (a result).
	Transfer = "transfer"
	// Mixed reads with probability ReadRatio (plain MVCC reads or FOR SHARE
	// reads, see Config.Reads) and increments a counter otherwise.
	Mixed = "mixed"
)

// Grid presets accepted in Config.Grid.
const (
	// GridQuick is the default: each selected workload and strategy at 1, 16
	// and 256 hot rows with 8 workers, at 1 and 4 workers on the hot row,
	// and an open-loop run at 0.5, 0.9 and 1.2 times the measured maximum
	// for two strategies; 1 s per cell. About 4 minutes on two cores for the
	// default workload.
	GridQuick = "quick"
	// GridFull runs every workload at rows 1, 4, 16, 256 with 16 workers
	// and at workers 1, 4, 16, 32 on the hottest row, adds Zipfian keys
	// (θ 0, 0.5, 0.9, 0.99, 1.2 over 10,000 keys at 16 workers) and
	// open-loop runs at seven fractions of the maximum for cas, for-update
	// and single-update; 3 s per cell. About an hour on two cores.
	GridFull = "full"
	// GridFast is a smoke run of seconds: rows 1 and 16, workers 1 and 4,
	// 300 ms per cell, one open-loop strategy. Numbers are not meaningful;
	// it exercises every code path (used by the tests and --fast).
	GridFast = "fast"
)

// Read modes of the mixed workload, accepted in Config.Reads.
const (
	ReadPlain = "plain" // a plain SELECT: an MVCC snapshot read, never blocks
	ReadShare = "share" // a transaction that takes FOR SHARE locks (pessimistic helpers)
)

// Arrival processes of open-loop cells, accepted in Config.Arrival.
const (
	ArrivalPoisson = "poisson" // exponential gaps (the default)
	ArrivalFixed   = "fixed"   // equal gaps, as wrk2
)

// Default endpoints when neither the Config nor the environment names one:
// the servers of scripts/services.sh.
const (
	DefaultPostgresURL   = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	DefaultMySQLDSN      = "root@tcp(127.0.0.1:13306)/"
	DefaultRedisAddr     = "127.0.0.1:16379"
	DefaultEtcdEndpoint  = "http://127.0.0.1:12379"
	DefaultSchema        = "concurkit_bench"
	DefaultKeys          = 10_000
	DefaultReadRatio     = 0.9
	DefaultStock         = 1_000_000
	DefaultBalance       = 1_000_000
	DefaultInterval      = time.Second
	DefaultOpTimeout     = 30 * time.Second
	DefaultSyncProbeTime = time.Second
)

// Rate is the offered load of an open-loop cell: either an absolute rate
// (PerSec) or a fraction of the closed-loop throughput measured in the same
// run for the same database, workload, strategy, rows and workers (OfMax).
// Exactly one is positive.
type Rate struct {
	PerSec float64 `json:"per_sec,omitempty"`
	OfMax  float64 `json:"of_max,omitempty"`
}

// String returns "500" or "x0.9".
func (r Rate) String() string {
	if r.OfMax > 0 {
		return "x" + strconv.FormatFloat(r.OfMax, 'g', -1, 64)
	}
	return strconv.FormatFloat(r.PerSec, 'g', -1, 64)
}

// autoRates are the fractions "auto" stands for.
var autoRates = []float64{0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25}

// ParseRates parses a comma-separated list of rates: numbers are ops/s
// ("500,1000"), x-prefixed numbers are fractions of the measured maximum
// ("x0.5,x1.1"), and "auto" is x0.25 … x1.25 (seven points). An empty string
// is no open-loop cell. Errors match concurkit.ErrInvalidArgument.
func ParseRates(s string) ([]Rate, error) {
	var out []Rate
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			continue
		case f == "auto":
			for _, x := range autoRates {
				out = append(out, Rate{OfMax: x})
			}
			continue
		}
		rel := strings.HasPrefix(f, "x")
		v, err := strconv.ParseFloat(strings.TrimPrefix(f, "x"), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: bench: rate %q: want ops/s (500), a fraction of the maximum (x0.9) or auto", concurkit.ErrInvalidArgument, f)
		}
		if rel {
			out = append(out, Rate{OfMax: v})
		} else {
			out = append(out, Rate{PerSec: v})
		}
	}
	return out, nil
}

// SLO is a latency target: at most Latency at the Percentile of the
// latency from the intended start (open loop: queueing included).
type SLO struct {
	// Percentile is in (0, 100): 99 is p99, 99.9 is p99.9.
	Percentile float64 `json:"percentile"`
	// Latency is the target, positive.
	Latency time.Duration `json:"latency_ns"`
}

// String returns the form ParseSLO reads, "p99=50ms".
func (o SLO) String() string {
	return "p" + strconv.FormatFloat(o.Percentile, 'g', -1, 64) + "=" + o.Latency.String()
}

// valid reports why o is not a usable target, or nil.
func (o SLO) valid() error {
	if !(o.Percentile > 0 && o.Percentile < 100) {
		return invalid("SLO percentile %v: want one in (0, 100), e.g. 99", o.Percentile)
	}
	if o.Latency <= 0 {
		return invalid("SLO latency %v: want a positive duration", o.Latency)
	}
	return nil
}

// ParseSLO parses a latency target "pP=D": a percentile (p99, p99.9, p50)
// and a duration (50ms, 1.5s). An empty string is no target (nil, nil).
// Errors match concurkit.ErrInvalidArgument.
func ParseSLO(s string) (*SLO, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	p, d, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(p, "p") {
		return nil, invalid("SLO %q: want pP=D, e.g. p99=50ms", s)
	}
	pct, err := strconv.ParseFloat(strings.TrimPrefix(p, "p"), 64)
	if err != nil {
		return nil, invalid("SLO %q: percentile %q is not a number", s, strings.TrimPrefix(p, "p"))
	}
	lat, err := time.ParseDuration(strings.TrimSpace(d))
	if err != nil {
		return nil, invalid("SLO %q: latency %q is not a duration (50ms, 1.5s)", s, d)
	}
	o := &SLO{Percentile: pct, Latency: lat}
	if err := o.valid(); err != nil {
		return nil, err
	}
	return o, nil
}

// Config describes a benchmark run. The zero value (or a nil *Config given
// to Run) is the default run: both databases, the counter workload, the
// default strategies, the quick grid. Run never modifies the Config.
type Config struct {
	// DBs to benchmark: Postgres, MariaDB. Empty means both.
	DBs []string
	// PostgresURL is a pgx connection URL. Empty means the environment's
	// CONCURKIT_POSTGRES_URL, else DefaultPostgresURL. The benchmark works
	// in its own schema (Schema) of that URL's database.
	PostgresURL string
	// MySQLDSN is a go-sql-driver/mysql DSN (its database part is ignored).
	// Empty means CONCURKIT_MYSQL_DSN, else DefaultMySQLDSN. The benchmark
	// works in its own database (Schema). Unless the DSN sets
	// interpolateParams (either way), the benchmark turns it on, as
	// concurkit recommends for production: otherwise every statement with
	// parameters pays a server-side prepare round trip. The header records
	// the setting (client:interpolateParams).
	//
	// A comma-separated list of DSNs names the nodes of a multi-primary
	// cluster (MariaDB Galera), one DSN each: every cell's connections are
	// opened on the nodes in turn, so its workers write on all of them at
	// once, and a node that refuses a connection is skipped for the next
	// one (without a timeout= parameter each node's dial is bounded by
	// 5 s). Setup, the table resets and the correctness check run on the
	// first node that answers. A comma inside one DSN cannot be written;
	// an empty element or a DSN that does not parse is an error matching
	// concurkit.ErrInvalidArgument.
	MySQLDSN string
	// RedisAddr is the Redis server of the redis-fenced strategy. Empty
	// means CONCURKIT_REDIS_ADDR, else DefaultRedisAddr.
	RedisAddr string
	// EtcdEndpoints are the etcd endpoints of the etcd-fenced strategy.
	// Empty means CONCURKIT_ETCD_ENDPOINT, else DefaultEtcdEndpoint.
	EtcdEndpoints []string
	// Schema is the PostgreSQL schema and the MariaDB database the
	// benchmark creates, fills and drops. Empty means DefaultSchema. It must
	// not exist already unless it was left by an earlier run (a schema that
	// holds tables the benchmark does not know is refused).
	Schema string
	// Keep leaves the schema and its tables in place after the run.
	Keep bool

	// Grid is the preset: GridQuick (default), GridFull or GridFast. The
	// fields below override parts of it.
	Grid string
	// Workloads to run. Empty means the preset's (quick and fast: counter;
	// full: all four).
	Workloads []string
	// Strategies to run, by name (see Strategies). Empty means every
	// strategy that is not hidden and that the database supports.
	Strategies []string
	// Rows are the hot-row counts (uniform choice among N rows). Workers
	// are the concurrent clients. When either is set, the two lists are
	// crossed in full; otherwise the preset's design applies.
	Rows, Workers []int
	// Zipf are the θ values of Zipfian key choice over Keys keys; each adds
	// cells at the preset's base worker count (every Workers value when
	// Workers is set).
	Zipf []float64
	// Keys is the Zipfian key space. Zero means DefaultKeys.
	Keys int
	// Duration is the measured time of each cell, after Warmup. Zero means
	// the preset's (quick 1 s, full 5 s, fast 300 ms).
	Duration time.Duration
	// Warmup runs before each cell's measurement, after each closed-loop
	// worker has completed its first operation; its operations count for
	// the correctness check, not for the metrics. Zero means the preset's;
	// negative means none.
	Warmup time.Duration
	// Ops, if positive, ends each cell after that many operations (Duration
	// still bounds it).
	Ops int64
	// Rates adds open-loop cells at these offered loads (see ParseRates).
	// Nil means the preset's; an empty non-nil slice means none.
	Rates []Rate
	// OpenStrategies are the strategies that get open-loop cells. Empty
	// means the preset's choice when Rates is nil (quick: cas and
	// for-update), every strategy otherwise.
	OpenStrategies []string
	// SLO, if set, is the latency target the verdicts judge by: the
	// fastest strategy that meets it at the offered load, or that none
	// does; each cell then reports its latency at the SLO's percentile and
	// the share of its operations above the target. Nil: throughput only.
	SLO *SLO
	// Arrival is the open-loop arrival process: ArrivalPoisson (default) or
	// ArrivalFixed.
	Arrival string
	// ReadRatio is the probability that a mixed-workload operation is a
	// read. Zero means DefaultReadRatio.
	ReadRatio float64
	// Reads are the read modes of the mixed workload. Empty means both.
	Reads []string
	// Stock is the initial stock per inventory row (zero: DefaultStock).
	// Balance is the initial balance per account (zero: DefaultBalance).
	Stock, Balance int64
	// Seed makes key choice and arrivals reproducible. Zero means 1.
	Seed uint64
	// Interval is the length of the HdrHistogram log intervals. Zero means
	// DefaultInterval.
	Interval time.Duration
	// OpTimeout bounds one operation, retries included. Zero means
	// DefaultOpTimeout.
	OpTimeout time.Duration
	// SyncProbe is how long each sync-rate measurement runs (disk fdatasync
	// loop, single-row commit loop). Zero means the preset's; negative
	// skips both.
	SyncProbe time.Duration

	// Args is recorded in the summary (the command line).
	Args []string
	// Progress, if set, is called before the first cell and after each cell.
	Progress func(Progress)
	// Log, if set, receives notes: skipped strategies, unreachable lock
	// servers, server settings.
	Log io.Writer
}

// Progress reports how far a run is.
type Progress struct {
	Done, Total int
	// Cell is the cell that just finished (empty before the first).
	Cell string
	// Remaining estimates the time left from the cells' planned durations.
	Remaining time.Duration
}

// preset is a grid design.
type preset struct {
	workloads     []string
	rows, workers []int
	baseWorkers   int
	cross         bool // rows at base workers + workers at the smallest rows
	zipf          []float64
	rates         []Rate
	openOnly      []string // strategies of the open-loop cells (empty: all)
	duration      time.Duration
	warmup        time.Duration
	syncProbe     time.Duration
}

func presetFor(name string) (preset, error) {
	switch name {
	case "", GridQuick:
		return preset{
			workloads: []string{Counter}, rows: []int{1, 16, 256}, workers: []int{1, 4, 8},
			baseWorkers: 8, cross: true,
			rates:    []Rate{{OfMax: 0.5}, {OfMax: 0.9}, {OfMax: 1.2}},
			openOnly: []string{"cas", "for-update"},
			duration: time.Second, warmup: 250 * time.Millisecond, syncProbe: time.Second,
		}, nil
	case GridFull:
		rates := make([]Rate, len(autoRates))
		for i, x := range autoRates {
			rates[i] = Rate{OfMax: x}
		}
		return preset{
			workloads: []string{Counter, Inventory, Transfer, Mixed},
			rows:      []int{1, 4, 16, 256}, workers: []int{1, 4, 16, 32}, baseWorkers: 16, cross: true,
			zipf:     []float64{0, 0.5, 0.9, 0.99, 1.2},
			rates:    rates,
			openOnly: []string{"cas", "for-update", "single-update"},
			duration: 3 * time.Second, warmup: 500 * time.Millisecond, syncProbe: 2 * time.Second,
		}, nil
	case GridFast:
		return preset{
			workloads: []string{Counter}, rows: []int{1, 16}, workers: []int{1, 4}, baseWorkers: 4,
			rates:    []Rate{{OfMax: 0.5}, {OfMax: 1.1}},
			openOnly: []string{"for-update"},
			duration: 300 * time.Millisecond, warmup: 50 * time.Millisecond, syncProbe: 200 * time.Millisecond,
		}, nil
	}
	return preset{}, fmt.Errorf("%w: bench: grid %q: want quick, full or fast", concurkit.ErrInvalidArgument, name)
}

// Settings is a Config with every default resolved, as recorded in the
// summary.
type Settings struct {
	DBs           []string      `json:"dbs"`
	PostgresURL   string        `json:"postgres_url,omitempty"` // password redacted
	MySQLDSN      string        `json:"mysql_dsn,omitempty"`    // password redacted
	MySQLNodes    []string      `json:"mysql_nodes,omitempty"`  // a DSN list's nodes, one each, redacted
	RedisAddr     string        `json:"redis_addr"`
	EtcdEndpoints []string      `json:"etcd_endpoints"`
	Schema        string        `json:"schema"`
	Keep          bool          `json:"keep"`
	Grid          string        `json:"grid"`
	Workloads     []string      `json:"workloads"`
	Strategies    []string      `json:"strategies"`
	Rows          []int         `json:"rows"`
	Workers       []int         `json:"workers"`
	Cross         bool          `json:"cross"`
	BaseWorkers   int           `json:"base_workers"`
	ZipfWorkers   []int         `json:"zipf_workers"`
	Zipf          []float64     `json:"zipf"`
	Keys          int           `json:"keys"`
	Duration      time.Duration `json:"duration_ns"`
	Warmup        time.Duration `json:"warmup_ns"`
	Ops           int64         `json:"ops"`
	Rates         []Rate        `json:"rates"`
	OpenOnly      []string      `json:"open_strategies,omitempty"`
	SLO           *SLO          `json:"slo,omitempty"`
	Arrival       string        `json:"arrival"`
	ReadRatio     float64       `json:"read_ratio"`
	Reads         []string      `json:"reads"`
	Stock         int64         `json:"stock"`
	Balance       int64         `json:"balance"`
	Seed          uint64        `json:"seed"`
	Interval      time.Duration `json:"interval_ns"`
	OpTimeout     time.Duration `json:"op_timeout_ns"`
	SyncProbe     time.Duration `json:"sync_probe_ns"`

	postgresURL, mysqlDSN string   // unredacted
	mysqlDSNs             []string // mysqlDSN split, one per node
	openExplicit          bool     // OpenOnly came from Config.OpenStrategies
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: bench: "+format, append([]any{concurkit.ErrInvalidArgument}, args...)...)
}

// resolve applies the defaults and validates; errors match
// concurkit.ErrInvalidArgument.
func (c *Config) resolve() (*Settings, error) {
	if c == nil {
		c = &Config{}
	}
	p, err := presetFor(c.Grid)
	if err != nil {
		return nil, err
	}
	s := &Settings{Grid: c.Grid, Keep: c.Keep, Ops: c.Ops, Cross: p.cross, BaseWorkers: p.baseWorkers}
	if s.Grid == "" {
		s.Grid = GridQuick
	}
	s.DBs = slices.Clone(c.DBs)
	if len(s.DBs) == 0 {
		s.DBs = []string{Postgres, MariaDB}
	}
	for _, db := range s.DBs {
		if db != Postgres && db != MariaDB {
			return nil, invalid("database %q: want postgres or mariadb", db)
		}
	}
	s.DBs = dedup(s.DBs)
	s.postgresURL = c.PostgresURL
	if s.postgresURL == "" {
		s.postgresURL = envOr("CONCURKIT_POSTGRES_URL", DefaultPostgresURL)
	}
	s.mysqlDSN = c.MySQLDSN
	if s.mysqlDSN == "" {
		s.mysqlDSN = envOr("CONCURKIT_MYSQL_DSN", DefaultMySQLDSN)
	}
	s.mysqlDSNs = splitDSNs(s.mysqlDSN)
	s.PostgresURL, s.MySQLDSN = redact.DSN(s.postgresURL), redactDSNs(s.mysqlDSNs)
	if slices.Contains(s.DBs, MariaDB) {
		if err := checkDSNs(s.mysqlDSN, s.mysqlDSNs); err != nil {
			return nil, err
		}
	}
	if len(s.mysqlDSNs) > 1 {
		for _, d := range s.mysqlDSNs {
			s.MySQLNodes = append(s.MySQLNodes, redact.DSN(d))
		}
	}
	s.RedisAddr = c.RedisAddr
	if s.RedisAddr == "" {
		s.RedisAddr = envOr("CONCURKIT_REDIS_ADDR", DefaultRedisAddr)
	}
	s.EtcdEndpoints = slices.Clone(c.EtcdEndpoints)
	if len(s.EtcdEndpoints) == 0 {
		s.EtcdEndpoints = strings.Split(envOr("CONCURKIT_ETCD_ENDPOINT", DefaultEtcdEndpoint), ",")
	}
	s.Schema = c.Schema
	if s.Schema == "" {
		s.Schema = DefaultSchema
	}
	if !validSchema(s.Schema) {
		return nil, invalid("schema %q: want 1-48 characters of [a-z0-9_], starting with a letter", s.Schema)
	}

	s.Workloads = slices.Clone(c.Workloads)
	if len(s.Workloads) == 0 {
		s.Workloads = p.workloads
	}
	for _, w := range s.Workloads {
		if !slices.Contains([]string{Counter, Inventory, Transfer, Mixed}, w) {
			return nil, invalid("workload %q: want counter, inventory, transfer or mixed", w)
		}
	}
	s.Workloads = dedup(s.Workloads)
	s.Strategies = slices.Clone(c.Strategies)
	for _, name := range s.Strategies {
		if lookupStrategy(name) == nil {
			return nil, invalid("strategy %q: want one of %s", name, strings.Join(strategyNames(true), ", "))
		}
	}
	s.Strategies = dedup(s.Strategies)

	s.Rows, s.Workers = p.rows, p.workers
	if len(c.Rows) > 0 || len(c.Workers) > 0 {
		s.Cross = false
		if len(c.Rows) > 0 {
			s.Rows = dedupInts(c.Rows)
		}
		if len(c.Workers) > 0 {
			s.Workers = dedupInts(c.Workers)
		}
	}
	for _, r := range s.Rows {
		if r < 1 || r > MaxKeys {
			return nil, invalid("rows %d outside [1, %d]", r, MaxKeys)
		}
	}
	for _, w := range s.Workers {
		if w < 1 || w > 1024 {
			return nil, invalid("workers %d outside [1, 1024]", w)
		}
	}
	if !slices.Contains(s.Workers, s.BaseWorkers) || len(c.Workers) > 0 {
		s.BaseWorkers = slices.Max(s.Workers)
	}
	s.ZipfWorkers = []int{s.BaseWorkers}
	if len(c.Workers) > 0 {
		s.ZipfWorkers = s.Workers
	}
	s.Zipf = p.zipf
	if c.Zipf != nil {
		s.Zipf = c.Zipf
	}
	for _, th := range s.Zipf {
		if th < 0 || th > 10 || math.IsNaN(th) {
			return nil, invalid("zipf θ %v outside [0, 10]", th)
		}
	}
	s.Keys = c.Keys
	if s.Keys == 0 {
		s.Keys = DefaultKeys
	}
	if s.Keys < 2 || s.Keys > MaxKeys {
		return nil, invalid("keys %d outside [2, %d]", s.Keys, MaxKeys)
	}
	s.Duration = c.Duration
	if s.Duration == 0 {
		s.Duration = p.duration
		if c.Ops > 0 {
			s.Duration = 10 * time.Minute // --ops ends the cell; this is only a cap
		}
	}
	if s.Duration < 10*time.Millisecond {
		return nil, invalid("duration %v: want at least 10ms", c.Duration)
	}
	switch {
	case c.Warmup < 0:
		s.Warmup = 0
	case c.Warmup == 0:
		s.Warmup = p.warmup
	default:
		s.Warmup = c.Warmup
	}
	if c.Ops < 0 {
		return nil, invalid("ops %d is negative", c.Ops)
	}
	s.Rates = p.rates
	s.OpenOnly = p.openOnly
	if c.Rates != nil {
		s.Rates, s.OpenOnly = c.Rates, nil
	}
	if len(c.OpenStrategies) > 0 {
		for _, name := range c.OpenStrategies {
			if lookupStrategy(name) == nil {
				return nil, invalid("open-loop strategy %q: want one of %s", name, strings.Join(strategyNames(true), ", "))
			}
		}
		s.OpenOnly, s.openExplicit = dedup(c.OpenStrategies), true
	}
	for _, r := range s.Rates {
		if (r.PerSec > 0) == (r.OfMax > 0) || r.PerSec < 0 || r.OfMax < 0 {
			return nil, invalid("rate %+v: exactly one of PerSec and OfMax must be positive", r)
		}
	}
	if c.SLO != nil {
		if err := c.SLO.valid(); err != nil {
			return nil, err
		}
		slo := *c.SLO
		s.SLO = &slo
	}
	s.Arrival = c.Arrival
	if s.Arrival == "" {
		s.Arrival = ArrivalPoisson
	}
	if s.Arrival != ArrivalPoisson && s.Arrival != ArrivalFixed {
		return nil, invalid("arrival %q: want poisson or fixed", c.Arrival)
	}
	s.ReadRatio = c.ReadRatio
	if s.ReadRatio == 0 {
		s.ReadRatio = DefaultReadRatio
	}
	if s.ReadRatio < 0 || s.ReadRatio > 1 || math.IsNaN(s.ReadRatio) {
		return nil, invalid("read ratio %v outside [0, 1]", c.ReadRatio)
	}
	s.Reads = slices.Clone(c.Reads)
	if len(s.Reads) == 0 {
		s.Reads = []string{ReadPlain, ReadShare}
	}
	for _, r := range s.Reads {
		if r != ReadPlain && r != ReadShare {
			return nil, invalid("read mode %q: want plain or share", r)
		}
	}
	s.Reads = dedup(s.Reads)
	s.Stock, s.Balance = c.Stock, c.Balance
	if s.Stock == 0 {
		s.Stock = DefaultStock
	}
	if s.Balance == 0 {
		s.Balance = DefaultBalance
	}
	if s.Stock < 0 || s.Balance < 0 {
		return nil, invalid("negative stock or balance")
	}
	s.Seed = c.Seed
	if s.Seed == 0 {
		s.Seed = 1
	}
	s.Interval = c.Interval
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	s.OpTimeout = c.OpTimeout
	if s.OpTimeout == 0 {
		s.OpTimeout = DefaultOpTimeout
	}
	if s.Interval < 0 || s.OpTimeout < 0 {
		return nil, invalid("negative interval or op timeout")
	}
	switch {
	case c.SyncProbe < 0:
		s.SyncProbe = 0
	case c.SyncProbe == 0:
		s.SyncProbe = p.syncProbe
	default:
		s.SyncProbe = c.SyncProbe
	}
	return s, nil
}

// splitDSNs splits a MySQLDSN at its commas, one DSN per node, each
// trimmed of white space; empty elements are kept (checkDSNs refuses them).
func splitDSNs(list string) []string {
	out := strings.Split(list, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// redactDSNs joins dsns with commas, each with its password redacted.
func redactDSNs(dsns []string) string {
	out := make([]string, len(dsns))
	for i, d := range dsns {
		out[i] = redact.DSN(d)
	}
	return strings.Join(out, ",")
}

// checkDSNs reports the first element of a MySQLDSN list (split into
// dsns) that is empty or does not parse; errors match
// concurkit.ErrInvalidArgument and show no password.
func checkDSNs(list string, dsns []string) error {
	for i, d := range dsns {
		where := "mysql DSN"
		if len(dsns) > 1 {
			where = fmt.Sprintf("mysql DSN %d of %d in %q", i+1, len(dsns), redactDSNs(dsns))
		}
		if d == "" {
			return invalid("%s is empty: want one DSN per node, separated by commas", where)
		}
		if _, err := mysql.ParseDSN(d); err != nil {
			return invalid("%s, %s: %w", where, redact.DSN(d), redact.Error(err, list, d))
		}
	}
	return nil
}

func validSchema(s string) bool {
	if len(s) == 0 || len(s) > 48 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func dedup(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func dedupInts(in []int) []int {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// errSkip marks a cell that cannot run here (a server is missing, the
// strategy does not apply to the database or workload); it is reported,
// not fatal.
var errSkip = errors.New("bench: skipped")
