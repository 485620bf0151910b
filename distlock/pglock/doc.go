// Package pglock is a distlock backend on PostgreSQL session-level
// advisory locks.
//
// Each lease holds pg_advisory_lock(k) on one pool connection, where k =
// pessimistic.AdvisoryKey(key) (64-bit FNV-1a of the key's UTF-8 bytes,
// documented there; distinct keys may collide, which costs concurrency,
// never safety). The fencing token is nextval of a sequence
// (DefaultSequence) drawn on the same session in the same statement, after
// the lock is granted: because only a live session holding the lock can
// draw it, a holder that lost its session can never mint a token above its
// successor's.
//
// # Connections
//
// The rule: a Locker keeps one pool connection per held lease, and
// borrows one more only for the duration of a single statement of an
// Acquire or TryAcquire attempt. A waiting Acquire holds no connection: it
// polls with pg_try_advisory_lock and backs off (jittered, 1 ms doubling to
// 50 ms) between attempts, giving the connection back each time. So
// waiters cannot starve the pool an application shares with the Locker —
// with pgxpool's default size of max(4, NumCPU) connections, waiters parked
// inside pg_advisory_lock would take every connection and the holder could
// not get one for its own work. Size the pool for the leases held at once
// plus the connections their holders use. The price of polling: a released
// lock is picked up by the next poll rather than handed over at once, and
// waiters are not served in arrival order.
//
// # Time to live
//
// The lease has a real time-to-live: the session's idle_session_timeout
// (PostgreSQL 14+) is set to the TTL, in milliseconds rounded up, so a
// holder that stops talking to the server for longer than the TTL (a
// paused process, a partition) loses its session, and with it the lock, on
// the server. TTLs above MaxTTL (the setting's maximum, about 24.8 days)
// are rejected as bad input (concurkit.ErrInvalidArgument) rather than
// clamped: a
// shorter server timeout would end the session inside the lease's
// validity. Extend (and AutoExtend, every TTL/3) renews it. The lease
// context is cancelled when the local validity (TTL − drift − margin) runs
// out, on Release, or at once when the connection dies: a goroutine per
// lease waits on the idle connection and sees the server's FATAL message
// (pg_terminate_backend, idle timeout, server shutdown) or the socket
// closing without polling.
//
// # When the server ends the session
//
// A session that ends on the server — pg_terminate_backend, a crashed or
// restarted server, a failover to a standby (advisory locks are not
// replicated: on the new primary every lock is free) — frees its advisory
// lock at once, before the holder can know. Another session can acquire
// the lock in that moment; the holder's lease ends when its watcher reads
// the closed connection: within milliseconds on a running process, and
// within SessionLossBound even on a loaded machine (the package's tests
// assert it). Until then Valid still reports true. That window is one more
// reason why only a fenced write protects storage: the successor's token
// is higher, so the old holder's late writes are refused. (A session that
// the server ends by its idle_session_timeout — the lease's TTL — is not
// such a case: the lease's local validity ends first.)
//
// After a failover the tokens go on increasing only if the standby was
// synchronous: the token sequence's WAL reaches it with the commits that
// waited for it. A standby promoted with commits missing (asynchronous
// replication) hands out tokens again that the old primary had given —
// TestFailover saw 2 after 42 — so fencing against that database is void
// until every old holder is gone. durabilitypg.Check reports such a
// standby at start-up. A connection cut
// without a word (a partition, a frozen server) is noticed by neither
// side: the server keeps the lock until its idle timeout, after the
// lease's own deadline.
//
// # Closing
//
// Close releases the leases still held, ends waiting Acquire calls and
// waits for the leases' session goroutines (see distlock.Closer); call it
// before closing the pool.
//
// # Bad input
//
// A nil pool (New), a nil or zero Locker, an empty key and a negative or
// too long TTL are rejected before any I/O with errors that match
// concurkit.ErrInvalidArgument (distlock.ErrInvalidKey for the key). A
// token sequence past its MAXVALUE is distlock.ErrTokenExhausted.
//
// Session-level advisory locks do not work behind a transaction-pooling
// proxy (PgBouncer in transaction mode); connect directly or in session
// mode.
//
// BackendPID tells which server session (pg_stat_activity.pid) holds a
// lease's lock.
//
// # Use
//
// New(client, *Config) returns a Locker: the client is a *pgxpool.Pool (pgx v5), and
// Config, whose nil value and zero fields are documented defaults, names the
// token sequence and sets the polling delays and the cleanup timeout. Acquire and TryAcquire hand out distlock.Leases; distlock.Do
// holds one while a function runs. Install observe.Hooks on the Acquire
// context to see lock waits, extensions (AutoExtend's failures included)
// and lease loss, reported with the package name "pglock". The package is
// named <system>lock, like every concurkit lock backend, so it never
// shadows the client library's own package name.
package pglock
