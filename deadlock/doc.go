// Package deadlock simulates strict two-phase locking (2PL), the way
// PostgreSQL row locks, InnoDB and SQL Server enforce serializability, and
// the ways a database keeps it live: deadlock detection on a wait-for graph
// and the prevention/avoidance policies wait-die, wound-wait, no-wait and
// lock timeout. It is pure Go and imports no database driver.
//
// # The model
//
// LockManager is the lock table. A transaction takes shared (S) or
// exclusive (X) locks on resources during its growing phase and releases
// all of them at once when it commits or aborts (Release): strict 2PL.
// Requests that conflict with a holder, or with a request already queued
// (so a waiting writer blocks later readers), wait in a FIFO queue; an S→X
// upgrade waits ahead of ordinary waiters. The wait-for graph is implicit
// in the queues: a waiting transaction waits for every holder and every
// earlier queued request on its resource whose mode conflicts with its own.
// FindCycle searches it breadth-first from one transaction, touching only
// the edges reachable from that transaction's new wait.
//
// Simulate runs transaction scripts (Txn: reads, writes and think time) on
// a discrete-event scheduler over a logical clock (Time, in logical
// microseconds): each read or write takes Options.OpTime once its lock is
// granted, at most Options.Concurrency transactions are active, an aborted
// attempt restarts after a seeded random delay with its original timestamp
// (a delay that grows with the transaction's aborts under NoWait and
// Timeout, see Progress). Everything is deterministic for a given workload
// and Options.Seed.
// Workload generates scripts from a seed: number of resources, uniform,
// Zipf or hot-spot popularity, transaction length, read ratio, Poisson
// arrivals and think time.
//
// # Policies
//
//   - Detect: on every wait, search for a cycle through the waiter and abort
//     a victim (Youngest, LeastWork or FewestLocks) until none is left.
//   - DetectPeriodic: search from every waiter every DetectInterval.
//   - WaitDie: an older requester waits, a younger one aborts itself.
//   - WoundWait: an older requester aborts younger holders, a younger waits.
//   - NoWait: any conflict aborts the requester (TryAcquire).
//   - Timeout: a wait that lasts LockTimeout aborts the waiter.
//
// Wait-die and wound-wait only ever let a transaction wait for a younger
// (respectively older) one, so the wait-for graph stays acyclic.
//
// # Progress
//
// Whether every transaction commits depends on the policy:
//
//   - WaitDie, WoundWait, and Detect and DetectPeriodic with the Youngest
//     victim rule: guaranteed. The oldest active transaction is never
//     aborted (it never dies, is never wounded, is never the youngest of a
//     cycle), so it gets every lock it queues for once the transactions
//     ahead of it finish or abort, and commits; restarts keep the original
//     timestamp, so every transaction becomes the oldest in turn.
//   - Detect and DetectPeriodic with LeastWork or FewestLocks: guaranteed
//     by the same argument for the transaction with the most work (most
//     locks), the oldest among equals: it is never the victim, so the
//     largest amount of work held cannot fall without a commit, and it
//     grows.
//   - NoWait and Timeout: not guaranteed. Nothing protects any transaction,
//     and a few transactions can abort each other forever. Under Timeout
//     this happens with a fixed restart delay: after a timeout the
//     survivors take the victim's locks and deadlock again among
//     themselves within a step or two, the victim comes back while they
//     wait and queues behind them, and the next timeout, LockTimeout
//     later, picks the survivor that waited first; with 3 transactions of
//     7 writes over 8 rows (Workload seed 735) nobody ever commits, for
//     every seed of the jitter, because a jitter narrower than LockTimeout
//     always lands in the same phase of the cycle. So under these two
//     policies the restart delay grows with the transaction's aborts
//     (exponential backoff with full jitter, capped by
//     Options.MaxRestartDelay, drawn from Options.Seed): a transaction that
//     keeps aborting stays away longer and longer, until another can run
//     alone and commit. With a cap more than twice the longest an attempt
//     can last (the default is four times) this happens, at every round of
//     aborts, with a probability bounded away from 0, so a run completes
//     with probability 1; but no bound on its events or logical time holds
//     for every seed. Bound such runs with Options.MaxEvents or MaxTime:
//     Simulate then stops with ErrLimit and the Result so far.
//
// # Output and checks
//
// Result counts commits, aborts by Cause, deadlocks found, mean and p99
// lock wait and throughput in committed transactions per logical second,
// and, with Options.History, keeps the committed history.
// Result.CheckSerializable verifies that the history's precedence graph is
// acyclic (conflict-serializable); a run without Options.History has none,
// and checking it is an error (ErrNoHistory), not a pass. Result.Graphs
// holds the wait-for graph at the first deadlocks (WaitForGraph.WriteDOT
// draws it for Graphviz with the cycle in red) and Result.Trace the
// schedule (Result.WriteTrace).
//
// # Memory
//
// A run holds memory in proportion to its transactions and to the live
// ones among them (Options.Concurrency), never to the lock requests it
// makes: a thrashing run (lock timeouts on a few hot rows) can make
// thousands of requests per transaction. Wait statistics stream into a
// histogram of bounded size; the grants of an attempt are dropped when it
// aborts, and those of committed attempts are kept only with
// Options.History. Options.Trace is the exception: it records every event.
//
// The package's tests replay random lock schedules step by step against
// real PostgreSQL and MariaDB and check that every deadlock the server
// reports (40P01, 1213) is one the LockManager finds on the same schedule,
// and vice versa; see replay_test.go for exactly what is compared.
package deadlock
