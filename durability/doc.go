// Package durability answers one question at start-up: can the connected
// database server keep a commit it has acknowledged — through a crash of
// the server, and through a failover to one of its replicas?
//
// Every exactly-once guarantee in concurkit rests on it. A fencing token
// that storage accepted (fenced), a completed idempotency key
// (idempotency), a message marked handled (inbox) or a saga step recorded
// as done (saga) is a committed row; if the server forgets it, a stale
// token is accepted again, a retried payment runs twice, a message is
// handled twice. None of those packages can see from a query that the
// server will forget, so the adapters durabilitypg and durabilitymysql read
// the settings that decide it and report, as a *Error matching
// ErrNotDurable, each one that breaks the promise:
//
//   - PostgreSQL: fsync = off or synchronous_commit = off (a crash loses the
//     last acknowledged commits); a standby streaming asynchronously (a
//     failover to it loses what it had not received: pg_stat_replication's
//     sync_state async or potential), or synchronous_commit = local while
//     standbys are synchronous; a session on a standby (writes fail).
//   - MariaDB/MySQL: innodb_flush_log_at_trx_commit other than 1; replicas
//     without semi-synchronous replication; read_only; a Galera node that
//     is not ready or not in the primary component. On Galera each commit
//     reaches every node before it is acknowledged, so one node's crash
//     loses nothing, but a crash of every node at once does unless each
//     flushes at commit: Jepsen's 2026 analysis of Galera 12.1.2 lost
//     acknowledged commits so with the value (2) Galera's documentation
//     recommends.
//
// Call Check once when the service starts, on the handle the packages will
// use, and decide: refuse to start, or log the *Error and accept the risk.
// Settings can differ per session (synchronous_commit can be set per role,
// database or transaction): Check sees the session it runs on.
//
// Check cannot see everything. A replica that is not connected at the
// moment is not listed; a failover tool that promotes an asynchronous
// replica breaks the promise whatever the primary's settings were. And no
// setting makes PostgreSQL's advisory locks (pglock) survive a failover:
// they live in the primary's memory, so a promoted standby has every lock
// free while the old holders may still believe they hold them. Fencing
// tokens — checked by storage, on a server that keeps its commits — are
// what keep the data safe then.
//
// The package imports only the standard library; the adapters import their
// driver.
package durability
