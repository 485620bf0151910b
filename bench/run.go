package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cellOverhead estimates a cell's fixed cost (table reset, connections,
// statistics, check) for the ETA.
const cellOverhead = 400 * time.Millisecond

// Run runs the benchmark that cfg describes (nil: the defaults) and returns
// its summary. It creates the schema (Config.Schema) on each database,
// runs every cell of the grid in turn — resetting the workload's table,
// opening one connection per worker, driving the load, reading the
// server's sync counter before and after, and checking the rows against
// what the clients were told — and drops the schema at the end unless
// Config.Keep.
//
// A cell that cannot run (a lock server is down, the strategy does not apply)
// is reported with StatusSkipped and its reason; a database that cannot be
// reached turns its cells into StatusError, and the run goes on with the
// other database. Run returns an error matching concurkit.ErrInvalidArgument
// for a bad Config (before any I/O), an error when no cell could run at all,
// and ctx's error (with the cells measured so far) when ctx ends. A cell
// whose check FAILED is a result, not an error: see Summary.Failed.
func Run(ctx context.Context, cfg *Config) (*Summary, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	runID := newRunID()
	sum := &Summary{
		Format: FormatVersion, RunID: runID, Started: time.Now().UTC(), Args: slices.Clone(cfg.Args),
		Settings: s, Host: hostInfo(), Strategies: Strategies(),
	}
	plan, notes := s.plan()
	sum.Notes = append(sum.Notes, notes...)
	total := 0
	var redis, etcd bool
	for _, cells := range plan {
		total += len(cells)
		for _, c := range cells {
			switch lookupStrategy(c.Strategy).Needs {
			case "redis":
				redis = true
			case "etcd":
				etcd = true
			}
		}
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	locks := openLockClients(ctx, s, redis, etcd)
	defer locks.close()
	for _, e := range []error{locks.redisErr, locks.etcdErr} {
		if e != nil {
			n := fmt.Sprintf("lock server unreachable, its strategies are skipped: %v", e)
			sum.Notes = append(sum.Notes, n)
			logf("bench: %s", n)
		}
	}

	done := 0
	perCell := s.Warmup + s.Duration + cellOverhead
	progress := func(cell string) {
		if cfg.Progress != nil {
			cfg.Progress(Progress{Done: done, Total: total, Cell: cell, Remaining: time.Duration(total-done) * perCell})
		}
	}
	progress("")
	r := &runner{s: s, sum: sum, locks: locks, closed: map[string]float64{}, zipf: map[string]*zipfian{}, logf: logf}
	for _, db := range s.DBs {
		cells := plan[db]
		if len(cells) == 0 {
			continue
		}
		r.database(ctx, db, runID, cells, func(res CellResult) {
			sum.Cells = append(sum.Cells, res)
			done++
			progress(res.ID)
		})
	}
	sum.Finished = time.Now().UTC()
	sum.Verdicts = verdicts(sum)
	if err := ctx.Err(); err != nil {
		return sum, fmt.Errorf("bench: run interrupted after %d of %d cells: %w", done, total, err)
	}
	ran := 0
	for _, c := range sum.Cells {
		if c.Status == StatusOK {
			ran++
		}
	}
	if ran == 0 {
		reason := "no cell in the grid"
		for _, c := range sum.Cells {
			if c.Reason != "" {
				reason = strings.TrimPrefix(c.Reason, "bench: ")
				break
			}
		}
		return sum, fmt.Errorf("bench: no cell ran: %s", reason)
	}
	return sum, nil
}

type runner struct {
	s      *Settings
	sum    *Summary
	locks  *lockClients
	closed map[string]float64 // closed-loop throughput by openKey, for relative rates
	zipf   map[string]*zipfian
	index  uint64
	logf   func(string, ...any)
}

// database runs the cells of one database.
func (r *runner) database(ctx context.Context, db, runID string, cells []Cell, emit func(CellResult)) {
	fail := func(err error, from int) {
		for _, c := range cells[from:] {
			emit(CellResult{Cell: c, ID: c.ID(), Status: StatusError, Reason: err.Error(), Syncs: -1})
		}
	}
	var env dbEnv
	var maxConns int
	switch db {
	case Postgres:
		e, err := openPostgres(ctx, r.s, r.locks, runID)
		if err != nil {
			r.note("%v", err)
			fail(err, 0)
			return
		}
		env, maxConns = e, e.maxConnections(ctx)
	case MariaDB:
		e, err := openMariaDB(ctx, r.s, r.locks, runID)
		if err != nil {
			r.note("%v", err)
			fail(err, 0)
			return
		}
		env, maxConns = e, e.maxConnections(ctx)
	}
	defer env.close()
	if err := env.claim(ctx); err != nil {
		err = fmt.Errorf("bench: %s: schema %s: %w", db, r.s.Schema, err)
		r.note("%v", err)
		fail(err, 0)
		return
	}
	if !r.s.Keep {
		// Registered after claim (a foreign schema is never dropped) and
		// before setup: a run cancelled while its CREATE SCHEMA
		// is on the server must not leave the schema behind (the drop is
		// IF EXISTS).
		defer func() {
			// Drop even when ctx has ended.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := env.drop(dctx); err != nil {
				r.note("%s: could not drop schema %s: %v", db, r.s.Schema, err)
			}
		}()
	}
	if err := env.setup(ctx); err != nil {
		err = fmt.Errorf("bench: %s: create schema %s: %w", db, r.s.Schema, err)
		r.note("%v", err)
		fail(err, 0)
		return
	}
	srv := env.info(ctx, r.s.SyncProbe)
	r.sum.Servers = append(r.sum.Servers, srv)
	if !srv.Durable {
		r.note("%s is not durable (commits do not wait for the disk): numbers are not comparable to a production server", db)
	}
	need := slices.Max(r.s.Workers) + spareConns + 2
	if maxConns > 0 && need > maxConns {
		err := fmt.Errorf("bench: %s max_connections is %d, the grid needs %d: lower --workers or raise max_connections", db, maxConns, need)
		r.note("%v", err)
		fail(err, 0)
		return
	}
	for i, c := range cells {
		if ctx.Err() != nil {
			fail(ctx.Err(), i)
			return
		}
		emit(r.cell(ctx, env, &srv, c))
	}
}

func (r *runner) note(format string, args ...any) {
	n := strings.TrimPrefix(fmt.Sprintf(format, args...), "bench: ")
	r.sum.Notes = append(r.sum.Notes, n)
	r.logf("bench: %s", n)
}

// openKey identifies the closed-loop cell an open-loop cell scales.
func openKey(c Cell) string {
	c.Mode, c.RateSpec, c.Rate, c.Arrival = ModeClosed, "", 0, ""
	return c.ID()
}

// cell runs one cell.
func (r *runner) cell(ctx context.Context, env dbEnv, srv *Server, c Cell) CellResult {
	r.index++
	res := func(status string, err error) CellResult {
		reason := ""
		if err != nil {
			reason = err.Error()
		}
		return CellResult{Cell: c, ID: c.ID(), Status: status, Reason: reason, Syncs: -1, Check: Check{Status: CheckSkipped}}
	}
	d := lookupStrategy(c.Strategy)
	if d.Needs != "" {
		if err := r.locks.available(d.Needs); err != nil {
			return res(StatusSkipped, err)
		}
	}
	if c.Mode == ModeOpen && c.Rate == 0 {
		rate, err := ParseRates(c.RateSpec)
		if err != nil || len(rate) != 1 {
			return res(StatusError, fmt.Errorf("bench: rate %q", c.RateSpec))
		}
		base := r.closed[openKey(c)]
		if base <= 0 {
			return res(StatusSkipped, errors.New("no closed-loop throughput to scale the rate from"))
		}
		c.Rate = rate[0].OfMax * base
	}
	wl := newWorkload(c.Workload, r.s)
	var ch chooser = uniform{rows: int64(c.Rows)}
	if c.Dist == DistZipf {
		k := strconv.Itoa(c.Rows) + "/" + strconv.FormatFloat(c.Theta, 'g', -1, 64)
		z := r.zipf[k]
		if z == nil {
			var err error
			if z, err = newZipfian(int64(c.Rows), c.Theta); err != nil {
				return res(StatusError, err)
			}
			r.zipf[k] = z
		}
		ch = z
	}
	if err := env.reset(ctx, wl.table, c.Rows, wl.initV); err != nil {
		return res(StatusError, fmt.Errorf("bench: reset %s: %w", wl.table, err))
	}
	cdb, err := env.open(ctx, c.Workers, wl.table, c.ReadMode)
	if err != nil {
		return res(StatusError, fmt.Errorf("bench: connect %d workers: %w", c.Workers, err))
	}
	exec, err := cdb.executor(d)
	if err != nil {
		cdb.close(ctx)
		if errors.Is(err, errSkip) {
			return res(StatusSkipped, err)
		}
		return res(StatusError, err)
	}
	before, okBefore := env.syncs(ctx)
	nodesBefore, galera := env.nodeStats(ctx)
	out, t := (&cellRun{s: r.s, cell: c, wl: wl, ch: ch, exec: exec, seed: r.s.Seed, index: r.index}).run(ctx)
	closeExecutor(ctx, exec)
	conns := cdb.nodeConns()
	cdb.close(ctx)
	after, okAfter := env.syncs(ctx)
	if galera {
		nodesAfter, _ := env.nodeStats(ctx)
		out.Galera = galeraCell(nodesBefore, nodesAfter, conns)
	}
	out.Syncs = -1
	if okBefore && okAfter {
		out.Syncs = after - before
		if out.TotalCommitted > 0 {
			v := float64(out.Syncs) / float64(out.TotalCommitted)
			out.SyncsPerCommit = &v
		}
	}
	if c.Dist == DistUniform && c.Rows == 1 && srv.Ceiling > 0 {
		v := out.Throughput / srv.Ceiling
		out.CeilingFraction = &v
	}
	rows, err := env.rows(context.WithoutCancel(ctx), wl.table)
	if err != nil {
		out.Check = Check{Status: CheckSkipped, Detail: "could not read the rows back: " + err.Error()}
	} else {
		wl.valueOnly = d.ValueOnly
		out.Check = wl.check(rows, int64(c.Rows), t)
	}
	if c.Mode == ModeClosed {
		r.closed[openKey(c)] = out.Throughput
	}
	return *out
}

// galeraCell is a cell's growth of the Galera counters, summed over the
// nodes that answered both before and after.
func galeraCell(before, after []nodeCounters, conns []int64) *GaleraCell {
	g := &GaleraCell{NodeConns: conns, NodeCommits: make([]int64, len(before))}
	for i := range before {
		b, a := before[i], after[i]
		g.NodeCommits[i] = -1
		if b.commits >= 0 && a.commits >= 0 {
			g.NodeCommits[i] = a.commits - b.commits
		}
		if b.certFailures >= 0 && a.certFailures >= 0 {
			g.CertFailures += a.certFailures - b.certFailures
		}
		if b.bfAborts >= 0 && a.bfAborts >= 0 {
			g.BFAborts += a.bfAborts - b.bfAborts
		}
	}
	g.Conflicts = g.CertFailures + g.BFAborts
	return g
}

// plan expands the settings into the cells of each database, closed-loop
// cells first (open-loop rates relative to the maximum need them).
func (s *Settings) plan() (map[string][]Cell, []string) {
	out := map[string][]Cell{}
	var notes []string
	for _, db := range s.DBs {
		strategies := s.strategiesFor(db, &notes)
		var closed, open []Cell
		for _, wname := range s.Workloads {
			wl := newWorkload(wname, s)
			modes := []string{""}
			if wname == Mixed {
				modes = s.Reads
			}
			fix := func(r int) int { return max(r, wl.minKeys()) }
			type point struct {
				dist        string
				rows, w     int
				theta       float64
				zipfWorkers bool
			}
			var points []point
			add := func(p point) {
				if !slices.Contains(points, p) {
					points = append(points, p)
				}
			}
			if s.Cross {
				for _, r := range s.Rows {
					add(point{dist: DistUniform, rows: fix(r), w: s.BaseWorkers})
				}
				for _, w := range s.Workers {
					add(point{dist: DistUniform, rows: fix(s.Rows[0]), w: w})
				}
			} else {
				for _, r := range s.Rows {
					for _, w := range s.Workers {
						add(point{dist: DistUniform, rows: fix(r), w: w})
					}
				}
			}
			for _, th := range s.Zipf {
				for _, w := range s.ZipfWorkers {
					add(point{dist: DistZipf, rows: s.Keys, theta: th, w: w})
				}
			}
			openFor := openStrategies(s, strategies)
			for _, rm := range modes {
				for _, st := range strategies {
					if !lookupStrategy(st).runs(wname) {
						continue
					}
					for _, p := range points {
						closed = append(closed, Cell{
							DB: db, Workload: wname, ReadMode: rm, Strategy: st,
							Dist: p.dist, Rows: p.rows, Theta: p.theta, Workers: p.w, Mode: ModeClosed,
						})
					}
					if !slices.Contains(openFor, st) {
						continue
					}
					for _, rate := range s.Rates {
						open = append(open, Cell{
							DB: db, Workload: wname, ReadMode: rm, Strategy: st,
							Dist: DistUniform, Rows: fix(s.Rows[0]), Workers: s.BaseWorkers, Mode: ModeOpen,
							RateSpec: rate.String(), Rate: rate.PerSec, Arrival: s.Arrival,
						})
					}
				}
			}
		}
		out[db] = append(closed, open...)
	}
	return out, notes
}

// strategiesFor returns the strategies of db: the ones asked for that run
// there, or every visible one.
func (s *Settings) strategiesFor(db string, notes *[]string) []string {
	var out []string
	names := s.Strategies
	explicit := len(names) > 0
	if !explicit {
		names = strategyNames(false)
	}
	for _, n := range names {
		d := lookupStrategy(n)
		if slices.Contains(d.DBs, db) {
			out = append(out, n)
		} else if explicit {
			*notes = append(*notes, fmt.Sprintf("strategy %s does not run on %s: not run there", n, db))
		}
	}
	return out
}

// openStrategies returns the strategies that get open-loop cells.
func openStrategies(s *Settings, strategies []string) []string {
	if len(s.OpenOnly) == 0 {
		return strategies
	}
	var out []string
	for _, st := range s.OpenOnly {
		if slices.Contains(strategies, st) {
			out = append(out, st)
		}
	}
	if len(out) == 0 && len(strategies) > 0 && !s.openExplicit {
		out = strategies[:1]
	}
	return out
}

func newRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

func hostInfo() Host {
	h, _ := os.Hostname()
	return Host{
		Hostname: h, OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version(),
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
}
