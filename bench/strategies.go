package bench

// This file and strategy_pg.go, strategy_mysql.go, strategy_lock.go and
// strategy_hotrow.go are the only files of the package that call concurkit's library packages
// (optimistic, pessimistic, fenced, retry, distlock and its backends): the
// benchmark measures the helpers users ship, never private copies, and
// keeping every call here lets an API rename be applied in one place.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/retry"
)

// Strategy kinds.
const (
	// KindToolkit is a concurrency-control strategy built from concurkit's
	// helpers.
	KindToolkit = "toolkit"
	// KindReference is the single-statement UPDATE … SET n = n + 1: no
	// read-modify-write at all, the ceiling a strategy can approach.
	KindReference = "reference"
	// KindLossy is the deliberately unsafe read-then-write; its cells must
	// be reported FAILED under contention.
	KindLossy = "lossy"
	// KindPeer is reserved for other libraries measured side by side.
	KindPeer = "peer"
)

// StrategyInfo describes a strategy in the summary.
type StrategyInfo struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Hidden      bool     `json:"hidden,omitempty"`
	DBs         []string `json:"dbs"`
	Description string   `json:"description"`
	// Calls lists the library entry points the strategy measures.
	Calls []string `json:"calls,omitempty"`
	// Needs names an external server the strategy requires ("redis",
	// "etcd"), if any.
	Needs string `json:"needs,omitempty"`
	// Workloads lists the workloads the strategy runs; empty means all.
	Workloads []string `json:"workloads,omitempty"`
	// ValueOnly: the strategy keeps the value column only (the hot-row
	// strategies); the check does not compare the inventory's units sold.
	ValueOnly bool `json:"value_only,omitempty"`
	// Reshapes: the strategy changes the shape of the work — many changes
	// per commit (combine, transfer-batch) or a row spread over several
	// (sharded) — so one commit per change does not bound it; the verdict
	// compares it with the best interactive strategy, one transaction per
	// change.
	Reshapes bool `json:"reshapes,omitempty"`
}

// runs reports whether the strategy runs the workload.
func (s StrategyInfo) runs(workload string) bool {
	return len(s.Workloads) == 0 || slices.Contains(s.Workloads, workload)
}

// strategyDef is a StrategyInfo with its implementations.
type strategyDef struct {
	StrategyInfo
	pg func(t *pgTarget) (executor, error)
	my func(t *myTarget) (executor, error)
}

// Strategies returns every strategy the benchmark knows, hidden ones
// included, in the order of the tables.
func Strategies() []StrategyInfo {
	out := make([]StrategyInfo, len(strategyDefs))
	for i, d := range strategyDefs {
		out[i] = d.StrategyInfo
		out[i].DBs = slices.Clone(d.DBs)
		out[i].Calls = slices.Clone(d.Calls)
		out[i].Workloads = slices.Clone(d.Workloads)
	}
	return out
}

var strategyDefs = []*strategyDef{
	{StrategyInfo: StrategyInfo{
		Name: "cas", Kind: KindToolkit, DBs: []string{Postgres, MariaDB},
		Description: "optimistic compare-and-swap on a version column, retried on conflict " +
			"(multi-row: CAS of each row inside one retried transaction)",
		Calls: []string{"optimistic.Do", "optimisticpg.Update", "optimisticmysql.Update",
			"pessimisticpg.InTx", "pessimisticmysql.InTx"},
	}, pg: pgCAS, my: myCAS},
	{StrategyInfo: StrategyInfo{
		Name: "for-update", Kind: KindToolkit, DBs: []string{Postgres, MariaDB},
		Description: "transaction that locks the rows with SELECT … FOR UPDATE (in key order), then reads and writes",
		Calls:       []string{"pessimisticpg.InTx", "pessimisticpg.LockRows", "pessimisticmysql.InTx", "pessimisticmysql.LockRows"},
	}, pg: pgLocked(pessimistic.ForUpdate, pessimistic.Wait, false), my: myLocked(pessimistic.Wait, false)},
	{StrategyInfo: StrategyInfo{
		Name: "for-no-key-update", Kind: KindToolkit, DBs: []string{Postgres},
		Description: "as for-update with PostgreSQL's weaker FOR NO KEY UPDATE (does not block foreign-key checks)",
		Calls:       []string{"pessimisticpg.InTx", "pessimisticpg.LockRows"},
	}, pg: pgLocked(pessimistic.ForNoKeyUpdate, pessimistic.Wait, false)},
	{StrategyInfo: StrategyInfo{
		Name: "nowait", Kind: KindToolkit, DBs: []string{Postgres, MariaDB},
		Description: "FOR UPDATE NOWAIT: a locked row aborts the transaction, which backs off and runs again",
		Calls:       []string{"pessimisticpg.InTx", "pessimisticpg.LockRows", "pessimisticmysql.InTx", "pessimisticmysql.LockRows"},
	}, pg: pgLocked(pessimistic.ForUpdate, pessimistic.NoWait, true), my: myLocked(pessimistic.NoWait, true)},
	{StrategyInfo: StrategyInfo{
		Name: "serializable", Kind: KindToolkit, DBs: []string{Postgres, MariaDB},
		Description: "plain read and write in a SERIALIZABLE transaction, retried on serialization failures and deadlocks",
		Calls:       []string{"pessimisticpg.InTx", "pessimisticmysql.InTx"},
	}, pg: pgSerializable, my: mySerializable},
	{StrategyInfo: StrategyInfo{
		Name: "advisory", Kind: KindToolkit, DBs: []string{Postgres},
		Description: "transaction-level advisory lock per row key (pg_advisory_xact_lock, keys in order), then read and write",
		Calls:       []string{"pessimisticpg.InTx", "pessimisticpg.AdvisoryXactLock", "pessimistic.AdvisoryKey"},
	}, pg: pgAdvisory},
	{StrategyInfo: StrategyInfo{
		Name: "redis-fenced", Kind: KindToolkit, DBs: []string{Postgres, MariaDB}, Needs: "redis",
		Description: "distributed lock per row on one Redis server (token from a database sequence), " +
			"then a read and a write fenced by the lease's token",
		Calls: []string{"distlock/redislock.New", "fencedpg.NewSequence", "fencedmysql.NewSequence",
			"fencedpg.Update", "fencedmysql.Update", "retry.Do"},
	}, pg: pgFencedLock("redis"), my: myFencedLock("redis")},
	{StrategyInfo: StrategyInfo{
		Name: "etcd-fenced", Kind: KindToolkit, DBs: []string{Postgres, MariaDB}, Needs: "etcd",
		Description: "distributed lock per row on etcd (token: the lock key's revision), then a read and a fenced write",
		Calls:       []string{"distlock/etcdlock.New", "fencedpg.Update", "fencedmysql.Update", "retry.Do"},
	}, pg: pgFencedLock("etcd"), my: myFencedLock("etcd")},
	{StrategyInfo: StrategyInfo{
		Name: "escrow", Kind: KindToolkit, DBs: []string{Postgres, MariaDB}, ValueOnly: true,
		Description: "one conditional UPDATE … SET v = v + d WHERE id = k AND v + d >= floor per row change " +
			"(no read, no version; a transfer's two in one retried transaction)",
		Calls: []string{"hotrowpg.Add", "hotrowmysql.Add", "pessimisticpg.InTx", "pessimisticmysql.InTx"},
	}, pg: pgEscrow, my: myEscrow},
	{StrategyInfo: StrategyInfo{
		Name: "combine", Kind: KindToolkit, DBs: []string{Postgres, MariaDB}, ValueOnly: true, Reshapes: true,
		Workloads: []string{Counter, Inventory, Mixed},
		Description: "a hotrow.Combiner shared by the workers coalesces concurrent changes of a row: " +
			"one statement and one commit per batch, the floor checked per change in arrival order",
		Calls: []string{"hotrow.NewCombiner", "hotrow.Combiner.Add", "hotrowpg.NewStore", "hotrowmysql.NewStore"},
	}, pg: pgCombine, my: myCombine},
	{StrategyInfo: StrategyInfo{
		Name: "transfer-batch", Kind: KindToolkit, DBs: []string{Postgres, MariaDB}, ValueOnly: true, Reshapes: true,
		Workloads: []string{Transfer},
		Description: "a hotrow.Ledger shared by the workers: one transaction per batch of transfers locks the " +
			"accounts in key order and applies each transfer with its own overdraft check",
		Calls: []string{"hotrow.NewLedger", "hotrow.Ledger.Transfer", "hotrowpg.NewLedgerStore", "hotrowmysql.NewLedgerStore"},
	}, pg: pgTransferBatch, my: myTransferBatch},
	{StrategyInfo: StrategyInfo{
		Name: "sharded", Kind: KindToolkit, DBs: []string{Postgres, MariaDB}, ValueOnly: true, Reshapes: true,
		Workloads: []string{Counter, Inventory},
		Description: "a hotrow.Sharded counter: each row split over 16 shard rows, a change on one at random " +
			"(a stock decrement borrows from the others only when its shard runs dry); folded back when the cell ends",
		Calls: []string{"hotrow.NewSharded", "hotrow.Sharded.Add", "hotrow.Sharded.Take", "hotrowpg.NewShardStore", "hotrowmysql.NewShardStore"},
	}, pg: pgSharded, my: mySharded},
	{StrategyInfo: StrategyInfo{
		Name: "adaptive", Kind: KindToolkit, DBs: []string{Postgres, MariaDB}, ValueOnly: true, Reshapes: true,
		Description: "a hotrow.Adaptive per cell (MOCC): a cold key by cas; a hot one, or a retry after a conflict, " +
			"through a Combiner whose batches bump the version cas checks; a transfer in one transaction that locks " +
			"its hot keys FOR UPDATE and compare-and-swaps the others (all locked on a retry)",
		Calls: []string{"hotrow.NewAdaptive", "hotrow.Adaptive.Do", "hotrow.Combiner.Add", "optimisticpg.Update",
			"optimisticmysql.Update", "pessimisticpg.LockRows", "pessimisticmysql.LockRows"},
	}, pg: pgAdaptive, my: myAdaptive},
	{StrategyInfo: StrategyInfo{
		Name: "single-update", Kind: KindReference, DBs: []string{Postgres, MariaDB},
		Description: "one UPDATE … SET n = n + 1 statement (multi-row: one per row in a retried transaction): " +
			"the reference ceiling when the change fits one statement",
		Calls: []string{"pessimisticpg.InTx", "pessimisticmysql.InTx"},
	}, pg: pgSingle, my: mySingle},
	{StrategyInfo: StrategyInfo{
		Name: "lossy", Kind: KindLossy, Hidden: true, DBs: []string{Postgres, MariaDB},
		Description: "read, then write the computed value back without a lock or version check: loses updates " +
			"(the correctness check must report it FAILED)",
	}, pg: pgLossy, my: myLossy},
}

func lookupStrategy(name string) *strategyDef {
	for _, d := range strategyDefs {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// strategyNames returns the names of the strategies (hidden ones too when
// all).
func strategyNames(all bool) []string {
	var out []string
	for _, d := range strategyDefs {
		if all || !d.Hidden {
			out = append(out, d.Name)
		}
	}
	return out
}

// Abort classes: why an attempt failed.
const (
	classConflict = iota
	classDeadlock
	classSerialization
	classLockNotAvailable
	classLockTimeout
	classStaleToken
	classNotAcquired
	classLeaseLost
	classOther
	numClasses
)

// classNames are the CSV/JSON names of the abort classes.
var classNames = [numClasses]string{
	"conflict", "deadlock", "serialization", "lock_not_available", "lock_timeout",
	"stale_token", "not_acquired", "lease_lost", "other",
}

// classify names the reason of a failed attempt.
func classify(err error) int {
	switch {
	case errors.Is(err, optimistic.ErrConflict):
		return classConflict
	case errors.Is(err, pessimistic.ErrDeadlock):
		return classDeadlock
	case errors.Is(err, pessimistic.ErrSerialization):
		return classSerialization
	case errors.Is(err, pessimistic.ErrLockNotAvailable):
		return classLockNotAvailable
	case errors.Is(err, pessimistic.ErrLockTimeout):
		return classLockTimeout
	case errors.Is(err, fenced.ErrStaleToken):
		return classStaleToken
	case errors.Is(err, distlock.ErrNotAcquired):
		return classNotAcquired
	case errors.Is(err, distlock.ErrLeaseLost):
		return classLeaseLost
	}
	// A driver error no helper mapped (see retryable).
	switch mysqlerr.Classify(err) {
	case sqlerr.Deadlock:
		return classDeadlock
	case sqlerr.Serialization:
		return classSerialization
	}
	return classOther
}

// Final outcomes of an operation that returned an error.
const (
	finalGaveUp  = iota // the retry budget ran out: nothing was written
	finalFailed         // a definite failure: nothing was written
	finalUnknown        // the write may or may not have happened
)

// final classifies an operation's error for the metrics and for the
// correctness check's tolerance.
func final(err error) int {
	switch {
	case errors.Is(err, concurkit.ErrOutcomeUnknown):
		return finalUnknown
	case errors.Is(err, retry.ErrExhausted):
		return finalGaveUp
	case errors.Is(err, errRejected):
		return finalFailed
	}
	// A lock that was never granted or a write refused for its token wrote
	// nothing; anything else (a timeout in the middle of a statement, a
	// broken connection) may have.
	if c := classify(err); c != classOther && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return finalFailed
	}
	return finalUnknown
}

// recorder collects the retries of the operation a worker runs.
type recorder struct {
	retries       int64
	aborts        [numClasses]int64
	releaseErrors int64 // lock releases the server did not confirm
}

func (r *recorder) retried(err error) {
	r.retries++
	r.aborts[classify(err)]++
}

// gaveUp counts the last failed attempt of an operation whose retry budget
// ran out (retry.Do reports only the attempts it retries).
func (r *recorder) gaveUp(err error) {
	var ex *retry.ExhaustedError
	if errors.As(err, &ex) {
		r.aborts[classify(ex.Last)]++
	}
}

// observedPolicy is the library's default retry policy (what users get),
// with retryable as its classifier. Its retries are counted through the
// observe.Hooks installed on every operation's context (see retryHooks);
// rec is kept in the signature so a strategy names the recorder its
// retries go to.
func observedPolicy(_ *recorder) retry.Policy { return retry.Policy{Retryable: retryable} }

// retryable is retry.IsRetryable, and also true for a MySQL/MariaDB
// deadlock (1213) or record-changed (1020) error still in the driver's
// form, which IsRetryable does not recognise. On Galera an autocommit
// statement that another node's write beat at certification fails with
// 1213 once the server's own retries (wsrep_retry_autocommit) are spent,
// and a single-statement helper that does not map driver errors (such as
// hotrowmysql.Add) returns it as is; the transaction helpers
// (pessimisticmysql.InTx) map it, a COMMIT's 1213 included. Either way the
// server rolled the statement or transaction back: nothing was written.
func retryable(err error) bool { return retry.IsRetryable(err) || mysqlerr.Retryable(err) }

// retryHooks count the retries reported through observe (see
// observedPolicy); the give-up event is counted from the operation's
// *retry.ExhaustedError instead.
func retryHooks(rec *recorder) *observe.Hooks {
	return &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if !e.GaveUp {
			rec.retried(e.Err)
		}
	}}
}

// lockPolicy is observedPolicy for the distributed-lock strategies: a
// write refused for a stale token or a lease lost before the write is
// retried with a new lease.
func lockPolicy(rec *recorder) retry.Policy {
	p := observedPolicy(rec)
	p.Retryable = func(err error) bool {
		return errors.Is(err, fenced.ErrStaleToken) || errors.Is(err, distlock.ErrLeaseLost) || retryable(err)
	}
	return p
}

// lockTTL is the lease TTL of the lock strategies: long enough that a
// loaded machine does not lose leases mid-operation (a lost lease is
// still safe: the fenced write refuses it).
const lockTTL = 10 * time.Second

// lockKey names the distributed lock of one row.
func lockKey(prefix, table string, key int64) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(table)
	b.WriteByte('/')
	b.WriteString(itoa(key))
	return b.String()
}

// errRejected ends a transaction whose operation was refused by the
// workload's rules (sold out, insufficient funds): rolled back, not
// retried, reported as a result.
var errRejected = errors.New("bench: rejected")

// sortedKeys returns the distinct keys of o in ascending order: the order in
// which the lock strategies take their locks.
func sortedKeys(o *op) []int64 {
	keys := make([]int64, 0, len(o.changes))
	for _, c := range o.changes {
		keys = append(keys, c.key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
