// Package ratelimitpg is the PostgreSQL store of package ratelimit, for
// services without Redis: a ratelimit.Limiter whose every decision is one
// SQL statement on a counter row, with the same contract, and the same
// decisions for the same calls, as ratelimitredis.
//
// # Use
//
// Create the tables once with migrations.Up (toolkit version 5, or copy
// migrations/postgres/toolkit/0005_ratelimit.up.sql): WindowTable for
// ratelimit.FixedWindow, GCRATable for ratelimit.GCRA. New(db, *Config)
// returns a Limiter on a pgx v5 pool (the usual choice), connection or
// transaction; a nil Config is GCRA on time.Now in the search_path's
// tables. Allow and AllowN decide; Reset forgets a key; Reap deletes the
// rows whose state is over — call it periodically, or the tables keep one
// row per key ever seen.
//
// # Exactness
//
// A decision is one INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING:
// the row is created for a new key, or locked and updated only if the
// guard holds (the stored window is older than the caller's, or its count
// plus n is within the limit; for GCRA, max(tat, now) + n·T ≤ now + τ).
// Under READ COMMITTED, the default, ON CONFLICT DO UPDATE evaluates the
// guard and the new values on the latest committed version of the row
// after it took the row lock, so concurrent callers serialise on the row
// and admit exactly the limit; a call the guard refuses changes nothing
// and returns no row. The clock's reading is a parameter ($2), never
// now(), so an injected clock drives windows and arrival times (see the
// package ratelimit doc on clocks). A refused GCRA call reads the row
// again for its RetryAfter: a second round trip, on refusals only.
//
// Pass a pool unless you mean otherwise: with a transaction as db, the
// key's row stays locked until the transaction ends (every other caller of
// that key waits) and a rollback takes the request back; at REPEATABLE
// READ or SERIALIZABLE, a concurrent decision on the same key fails with
// a serialization error (SQLSTATE 40001) instead of waiting.
//
// # Tables
//
// The tables are UNLOGGED, with fillfactor 70 and no index but the
// primary key: rate-limit counts are soft state, like Redis without
// persistence. A decision then does not wait for a WAL flush (a logged
// table caps one hot key at the disk's fsync rate) and its update stays
// HOT; the price is that a crash or a failover to a standby starts the
// counts empty (each key gets its quota again once). ALTER TABLE … SET
// LOGGED if the counts must survive those.
package ratelimitpg
