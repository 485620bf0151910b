// Package chaos is concurkit's fault-injection harness: it runs a workload
// against a real backend from several client processes, injects faults from
// a seed, records every operation's invocation and completion (the
// ambiguous ones marked as such), and checks the history — the approach of
// Jepsen and of etcd's robustness tests, built so that the toolkit finds
// its own safety bugs before a user does, and so that a user can point it
// at their own servers.
//
// # Workloads
//
//   - counter: each client takes the lease of one lock key (redis, redlock,
//     zookeeper, etcd, dynamodb or postgres backend), reads a counter in
//     PostgreSQL, thinks, writes the value + 1 and a log row in one
//     transaction, and releases. The read and the write carry the lease's
//     fencing token through fencedpg; the checker reads the log in commit
//     order and reports lost updates, stale writes (a lower token accepted
//     after a higher one), lost acknowledgements, phantoms and a final value
//     that disagrees with the log.
//   - election: every client campaigns in one election (distlock/election,
//     same backends as counter); the leader increments the counter with its
//     term as the fencing token for as long as its term holds. The
//     counter's checks apply, and the report notes the failovers (changes
//     of term) and how long the counter stood still at each (p50/p99/max).
//   - semaphore: clients take one of N permits (distlock/semaphore, same
//     backends; Options "keys", default 3) and increment that permit's
//     counter with the permit's token; the counter's checks per permit
//     mean never more than N holders with accepted writes. The report
//     notes the permits' handovers and how long each took.
//   - register: read, write and compare-and-set on a few keys through the
//     optimistic adapters (postgres, mysql, dynamodb), checked for
//     linearizability with porcupine, per key and time-bounded; the
//     visualisation of a key that fails is written to Config.Out.
//   - idempotent: a net/http server in each client process, its handler
//     behind idempotency.Middleware (keys on postgres, mysql or dynamodb);
//     clients cancel a share of their attempts at random points and retry
//     until they get an answer. Checked: at most one effect per key, and the
//     answer a client accepted is the effect that committed.
//   - ratelimit: clients ask a fixed-window limiter (redis or postgres) for
//     one key; no window may admit more than the limit.
//   - messages: business transactions add events to the outbox
//     (PostgreSQL); relays publish them to NATS JetStream or RabbitMQ
//     (backend nats or amqp); consumers apply each through the inbox.
//     After a drain without faults, every committed event must have had
//     its effect exactly once, and nothing may be stranded.
//   - saga: every client process runs the same stream of three-step sagas
//     (postgres or mysql store), some failing and compensating, and first
//     resumes the unfinished ones it finds, so runners race for each; the
//     steps record when they ran. No step may run in two runners at once,
//     none again once recorded, every compensated step compensated once.
//
// # Nemeses
//
// Two streams of faults drawn from the seed (see Fault and Nemeses), each
// one fault at a time, running at once. The clients': processes SIGSTOPped
// for 1–3× the lease TTL (the GC pause; lease holders are preferred) or
// SIGKILLed and replaced. The system's: through an in-process Toxiproxy in
// front of every server, added latency, reset connections, answers dropped
// after the request reached the server (what makes a driver or SDK retry
// an applied write) and frozen servers; the run's database sessions
// terminated; server processes frozen or killed and restarted
// (Config.Servers); a Redis primary lost with its last writes and a
// replica promoted (Config.Failovers, RedisFailover); a PostgreSQL primary
// killed while its standbys receive nothing, a standby promoted and the old
// primary rebuilt as its standby (PostgresFailover): with a synchronous
// standby nothing acknowledged may be lost, with an asynchronous one the
// checkers find lost acknowledgements and lost effects — what
// durabilitypg.Check warns of.
//
// # Negative controls
//
// Config.Unsafe runs the same workload with its safety mechanism off: the
// counter without fencing, the register's cas without its version check,
// the HTTP handler without idempotency keys, a check-then-increment rate
// limiter, a consumer without the inbox, sagas without their store's
// claims. A harness that finds nothing there has faults
// too weak to judge the safe run, so the tests run both, with the same
// seed, and assert both verdicts.
//
// # Client processes
//
// Run starts Config.Command (default: the running executable) once per
// client, with the client's settings in the environment; that program's
// main, or its TestMain, must hand over to WorkerMain when IsWorker
// reports true. `concurkit chaos` does, so the command line is the easiest
// way in:
//
//	concurkit chaos --workload counter --backend etcd --duration 60s --seed 7 --out /tmp/chaos
//
// Clients write their operations to standard output as JSON lines, one
// line per invocation and one per completion, so a killed client leaves
// its last operation Pending in the history instead of losing it.
package chaos
