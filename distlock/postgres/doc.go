// Package postgres is a distlock backend on PostgreSQL session-level
// advisory locks.
//
// Each acquisition takes a dedicated connection from the pool and holds
// pg_advisory_lock(k) on it, where k = pessimistic.AdvisoryKey(key) (64-bit
// FNV-1a of the key's UTF-8 bytes, documented there; distinct keys may
// collide, which costs concurrency, never safety). The fencing token is
// nextval of a sequence (DefaultSequence) drawn on the same session in the
// same statement, after the lock is granted: because only a live session
// holding the lock can draw it, a holder that lost its session can never
// mint a token above its successor's.
//
// The lease has a real time-to-live: the session's idle_session_timeout
// (PostgreSQL 14+) is set to the TTL, so a holder that stops talking to the
// server for longer than the TTL (a paused process, a partition) loses its
// session, and with it the lock, on the server. Extend (and AutoExtend,
// every TTL/3) renews it. The lease context is cancelled when the local
// validity (TTL − drift − margin) runs out, on Release, or at once when the
// connection dies: a goroutine per lease waits on the idle connection and
// sees the server's FATAL message (pg_terminate_backend, idle timeout,
// server shutdown) or the socket closing without polling.
//
// Session-level advisory locks do not work behind a transaction-pooling
// proxy (PgBouncer in transaction mode); connect directly or in session
// mode.
package postgres
