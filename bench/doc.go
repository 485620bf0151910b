// Package bench is concurkit's contention benchmark: it measures the
// toolkit's own helpers — the ones users ship, never private copies —
// under contention on real PostgreSQL and MariaDB servers, checks that no
// update was lost, and says which strategy to use at which contention.
// The command `concurkit bench` runs it; Run is the same from Go.
//
// # What a run does
//
// For each database it creates its own schema (PostgreSQL) or database
// (MariaDB), Config.Schema, default "concurkit_bench", with one table per
// workload, and drops it at the end unless Config.Keep; it refuses a
// schema that holds tables it did not create. Each cell of the grid then
// resets the workload's table, opens one connection per worker (before the
// clock starts), drives the load for a warmup and a measured window, reads
// the server's sync counter before and after, and reads the rows back for
// the correctness check.
//
// # Workloads
//
//   - counter: read-modify-write of one integer (v = v + 1).
//   - inventory: sell one unit, a decrement with a floor: an empty stock
//     is a "sold out" result (Rejected), not an error.
//   - transfer: move 1-10 units between two accounts touched in random
//     order — the deadlock-prone shape; an overdraft is refused.
//   - mixed: Config.ReadRatio reads (plain MVCC snapshot reads, or a
//     transaction that takes FOR SHARE first; Config.Reads), counter
//     increments otherwise.
//
// # Strategies
//
// See Strategies for the list with the library calls each one measures:
// optimistic CAS + retry (cas), FOR UPDATE (for-update), FOR NO KEY UPDATE
// (PostgreSQL), NOWAIT + retry (nowait), SERIALIZABLE + retry
// (serializable), transaction-level advisory locks (PostgreSQL), a
// distributed lock per row with a fenced write (redis-fenced, etcd-fenced),
// the hot-row helpers of package hotrow — one conditional UPDATE per row
// change (escrow), a Combiner that commits a batch of concurrent changes
// of a row at once (combine; counter, inventory, mixed), a Ledger that
// commits a batch of transfers at once (transfer-batch; transfer) and a
// Sharded counter that spreads each row over 16 shard rows (sharded;
// counter, inventory; the cell creates the shards from the rows and folds
// their sums back when it ends, outside the measured window) — and
// the single statement UPDATE … SET v = v + 1 (single-update) as the
// reference ceiling of one commit per change. The hot-row strategies keep
// the value column only: inventory's units-sold column is not checked for
// them. Retries use the library's default retry policy, the
// budget users get: operations whose budget ran out are counted (GaveUp)
// and shown, never hidden. The lossy strategy (read, then write the value
// back without a lock or a version check) is hidden from the default set:
// name it to run it; its contended cells must be reported FAILED.
//
// Lock strategies take their locks in ascending key order (LockRows does
// it for the row locks; the benchmark does it for advisory and
// distributed locks, which have no cross-server deadlock detector);
// transfer's statements run in the workload's random order, so cas,
// serializable and single-update meet deadlocks and retry them.
//
// # Key choice and load
//
// Hot rows: each operation picks one of Rows rows uniformly (Rows = 1 is a
// single hot row). Zipfian: keys 1..Keys with P(k) ∝ 1/k^θ, YCSB's
// generator (Gray et al.) for θ < 1 and an exact inversion for θ ≥ 1; key
// 1 is the hottest. Transfer needs two distinct rows: one hot row becomes
// a hot pair.
//
// Closed loop (the default): each worker starts its next operation when the
// last one ends; the throughput is the maximum the strategy sustains.
// Open loop (Config.Rates): operations arrive at a fixed offered rate
// (Poisson or evenly spaced) into a queue served by the workers; latency is
// measured from each operation's intended start, as wrk2 and YCSB's
// "intended" latency do, so a stalled system is charged for every
// operation that waited (no coordinated omission). Service time is measured
// from the actual start. A rate can be absolute (ops/s) or a fraction of
// the closed-loop maximum measured earlier in the same run ("x0.9"), which
// draws the hockey stick: latency stays flat, then explodes as the offered
// load nears the maximum.
//
// # Metrics per cell (CellResult)
//
//   - Throughput: successful operations (writes committed, refusals,
//     reads) that completed in the measured window, per second.
//   - RetriesPerOp / AbortsPerOp: retried attempts / failed attempts by
//     cause (conflict, deadlock, serialization, lock_not_available,
//     stale_token, …) per successful operation.
//   - GaveUp (retry budget exhausted), Failed, Unknown (outcome unknown:
//     the check tolerates them), Missed (open loop: never started).
//   - Latency and Service percentiles p50, p95, p99, p99.9, max from
//     HdrHistograms (1 µs to 10 min, three significant digits), with an
//     interval log per cell (hlog/, format 1.3, values in ns, tags
//     "latency" and "service"; HdrHistogram's tools and
//     hdrhistogram-go's log reader read it).
//   - Syncs and SyncsPerCommit: the increase of the server's sync counter
//     (PostgreSQL pg_stat_wal.wal_sync; MariaDB Innodb_os_log_fsyncs, or
//     Innodb_data_fsyncs on MariaDB ≥ 10.8, which no longer has it) divided
//     by the cell's successful operations. The counter is server-wide:
//     other clients of the server count too. PostgreSQL publishes a
//     backend's WAL statistics when it exits, so each cell closes its
//     connections and waits for their sessions to end before reading it.
//   - CeilingFraction (hot-row cells on a durable server): Throughput
//     divided by Server.Ceiling.
//   - Check: PASSED, or FAILED with the first wrong rows. Every row must
//     equal its initial value plus the changes the clients were told
//     committed (within the changes of unknown outcome); inventory stock
//     never below zero and sold = initial − stock; transfer balances never
//     below zero and the total conserved. A cell that loses an update is
//     FAILED, not fast, and the CLI exits non-zero (the lossy strategy
//     excepted).
//
// # The header: servers and the durable ceiling
//
// Each Server records the version, the durability settings
// (synchronous_commit, fsync, full_page_writes, wal_sync_method;
// innodb_flush_log_at_trx_commit, sync_binlog, innodb_flush_method, …),
// and two measured rates: Disk, an fdatasync loop of 8 KiB overwrites of a
// preallocated file in the file system of the server's data directory (when
// the server is on this machine and the directory is readable), and
// CommitLoop, one connection's single-row UPDATE commits in a loop. The
// hot-row ceiling (Server.Ceiling) is Disk's rate, else CommitLoop's: on
// PostgreSQL a hot row's transactions are serial up to their commit flush
// (the row lock is released after the commit record reaches the disk), so
// one durable hot row cannot commit faster than the disk syncs. InnoDB
// releases row locks before the log flush and groups commits, so on
// MariaDB a hot row can exceed the ceiling (a fraction above 100%).
// A server that is not durable (fsync or synchronous_commit off,
// innodb_flush_log_at_trx_commit ≠ 1) has no ceiling, and its numbers say
// little about production: the run notes it.
//
// On MariaDB the benchmark turns on go-sql-driver's interpolateParams
// unless the DSN sets it either way (client:interpolateParams in the
// header): without it every statement with parameters pays a server-side
// prepare round trip, which concurkit recommends avoiding in production
// and which on a durable hot row made CAS 0.68× FOR UPDATE instead of ≥1×.
//
// # Galera: one DSN per node
//
// Config.MySQLDSN (`--mysql-dsn`) may list the nodes of a MariaDB Galera
// cluster, one DSN each, separated by commas. Each cell's pool opens its
// connections on the nodes in turn, as a round-robin proxy would (a node
// that refuses a connection is skipped; without a timeout= parameter a
// node's dial gives up after 5 s): the strategies share one *sql.DB per
// cell, as an application does, and each worker's operations run on the
// connections it takes from it. Setup, the table resets and the check's
// reads run on the first node that answers; after a reset every node
// reads the table causally (wsrep_sync_wait=1) before the workers start,
// and the check reads causally, so it sees every acknowledged commit of
// every node. A server with wsrep_on=ON is recorded as such
// (Server.Label "MariaDB Galera (3 nodes)", Server.Nodes redacted), and
// each cell reports CellResult.Galera: the growth of
// wsrep_local_cert_failures and wsrep_local_bf_aborts summed over the
// nodes (the "cert fail" column, beside the retries), the connections and
// the local commits of each node. The counters are server-wide: other
// clients of the cluster count too. Syncs and the sync probes are the
// first answering node's.
//
// A row lock holds only on its own node: two nodes' transactions that lock
// the same row FOR UPDATE both run, and the later to commit fails
// certification (or is aborted by the replicated write) with error 1213,
// which the transaction helpers map to pessimistic.ErrDeadlock and retry —
// COMMIT's included. The verdict then says, with the run's numbers, that
// FOR UPDATE behaved like optimistic concurrency across nodes. An
// autocommit statement that loses certification more often than the
// server retries it (wsrep_retry_autocommit) returns 1213, which a
// single-statement helper may return in the driver's form: the
// benchmark's retry policy (the library default otherwise) retries that
// too, and counts it as a deadlock abort that wrote nothing. redis-fenced
// is skipped on Galera: it takes its tokens from a MariaDB SEQUENCE, and
// each node draws from its own copy.
// Compare a Galera run with a single server's through --baseline (cells
// match by ID); `make bench-galera` runs both.
//
// # Reading the results
//
// Compare strategies within one run, never absolute numbers across
// machines. Per database and workload the Verdicts say which strategy is
// fastest at the hottest and coldest points, over which range of hot rows
// (or θ) one strategy wins (a lead below 10% is called a tie), from how many
// writers per row FOR UPDATE beats CAS and by how much, how close the hot
// row comes to the durable ceiling, what the single statement would give,
// which strategies gave operations up, and the p99 near the knee of the
// open-loop curve. results.md has the same and the table; results.csv one
// row per cell; summary.json everything (FormatVersion; fields are only
// added, and strategy kinds leave room for peer libraries). Plots: throughput
// vs workers, throughput and retries vs hot rows and θ, latency vs offered
// load. Strategies that reshape the work (combine, transfer-batch,
// sharded: StrategyInfo.Reshapes) are ranked with the rest, but the
// ceiling and the single statement are compared with the best strategy
// that commits once per change.
//
// Throughput alone picks strategies with a starving tail. Config.SLO
// (`--slo p99=50ms`) adds a latency target: each cell reports its latency
// at the SLO's percentile and the share of operations above the target,
// and each verdict names the strategy that meets the target at the highest
// offered load of the hottest point's open-loop cells (committing at least
// 90% of the offered rate), or says that none does (Verdict.SLOChoice).
// Every cell reports fairness too: attempts per operation at the 99th
// percentile and the most one operation took (CellResult.AttemptsP99,
// AttemptsMax), which a mean retry count hides.
//
// A later run compares itself with an earlier summary.json (Compare,
// `--baseline`): cells are matched by Cell.ID, and a throughput drop or a
// p99 rise beyond the tolerance, or a check that now fails, is flagged.
//
// # Grids and time
//
// GridQuick (the default): 1 s cells, five closed-loop points per strategy
// and three open-loop points for cas and for-update — about 120 cells and
// 4 minutes on two cores for both databases. GridFull: every workload at rows 1, 4, 16, 256
// (16 workers) and workers 1, 4, 16, 32 (one hot row), five Zipfian θ, and
// seven open-loop points for cas, for-update and single-update, 3 s cells:
// the CLI prints the cell count and its estimate at the start (about an
// hour on two cores). GridFast: a smoke
// run of seconds for tests. Explicit Rows or Workers are crossed in full.
package bench
