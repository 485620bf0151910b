package bench

import (
	"context"
	"net"
	"os"
	"time"
)

// dbEnv is one database server for the whole run.
type dbEnv interface {
	// info describes the server and measures its sync ceilings (probe: how
	// long each measurement runs; 0 skips them). It needs the schema.
	info(ctx context.Context, probe time.Duration) Server
	// claim fails when the schema holds a table the benchmark did not
	// create: such a schema is never set up nor dropped.
	claim(ctx context.Context) error
	// setup creates the schema, its tables and the token sequence.
	setup(ctx context.Context) error
	// drop removes the schema and everything in it.
	drop(ctx context.Context) error
	// reset empties table and inserts rows 1..n with v = initV.
	reset(ctx context.Context, table string, n int, initV int64) error
	// open connects a cell's clients: a pool of workers connections (plus
	// spares), all opened before it returns.
	open(ctx context.Context, workers int, table, readMode string) (cellDB, error)
	// syncs reads the server's sync counter; ok false when unknown.
	syncs(ctx context.Context) (n int64, ok bool)
	// rows reads table back for the correctness check.
	rows(ctx context.Context, table string) (map[int64]rowState, error)
	// nodeStats reads the conflict and commit counters of each node of a
	// Galera cluster; ok false on any other server.
	nodeStats(ctx context.Context) (nodes []nodeCounters, ok bool)
	close()
}

// nodeCounters are one Galera node's server-wide counters (-1: the node
// did not answer).
type nodeCounters struct {
	certFailures, bfAborts, commits int64
}

// cellDB is a cell's connections.
type cellDB interface {
	executor(d *strategyDef) (executor, error)
	// nodeConns returns the connections opened on each node of the DSN
	// list so far (nil for PostgreSQL).
	nodeConns() []int64
	// close closes the connections and waits until the server has ended
	// their sessions (so the server's statistics include them).
	close(ctx context.Context)
}

// spareConns are the connections a cell's pool has beyond one per worker
// (token sequences, share-mode reads).
const spareConns = 4

// tableDDL is the column list of every workload table (portable SQL).
const tableColumns = `(id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL, w BIGINT NOT NULL DEFAULT 0, ` +
	`version BIGINT NOT NULL DEFAULT 1, max_seen_token BIGINT NOT NULL DEFAULT 0)`

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "" || host == "localhost" || (len(host) > 0 && host[0] == '/') {
		return true // empty or a Unix socket directory
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// timedLoop runs f repeatedly for d and returns the rate and median time.
func timedLoop(ctx context.Context, method, path string, d time.Duration, f func() error) (*SyncRate, error) {
	h := newHist()
	start := time.Now()
	var n int64
	for time.Since(start) < d && ctx.Err() == nil {
		t := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		record(h, time.Since(t))
		n++
	}
	secs := time.Since(start).Seconds()
	r := &SyncRate{Method: method, Path: path, Count: n, Seconds: secs}
	if secs > 0 {
		r.PerSec = float64(n) / secs
	}
	r.P50 = float64(h.ValueAtQuantile(50)) / 1e6
	return r, nil
}

// diskSync measures the sync rate of the file system that holds dataDir:
// 8 KiB overwrites of a preallocated 1 MiB file, each followed by
// fdatasync (fsync where there is no fdatasync): the operation a WAL or
// redo-log flush of one commit costs. The file goes next to dataDir (its
// parent directory, when on the same file system) or into it, and is
// removed afterwards.
func diskSync(ctx context.Context, dataDir string, d time.Duration) (*SyncRate, error) {
	dir := probeDir(dataDir)
	f, err := os.CreateTemp(dir, ".concurkit-bench-sync-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const size, block = 1 << 20, 8 << 10
	if _, err := f.Write(make([]byte, size)); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	buf := make([]byte, block)
	var off int64
	return timedLoop(ctx, "fdatasync of an 8 KiB overwrite", f.Name(), d, func() error {
		buf[0]++
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
		off = (off + block) % size
		return fdatasync(f)
	})
}
