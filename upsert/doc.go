// Package upsert inserts rows exactly once and reports whether the call
// created the row or found it already there — the building block of
// idempotent writes (idempotency keys, inbox dedup, get-or-create).
//
// # Layout: one core, one adapter per driver family
//
// This package is the driver-neutral core: Table, ErrContended and
// MaxReadAttempts; it imports only the standard library. The operations
// live in one thin adapter per driver family, with the same names, so a
// program compiles only the driver it uses: upsertpg (pgx v5), upsertmysql
// (database/sql + go-sql-driver/mysql) and upsertdynamo (aws-sdk-go-v2).
// Every concurkit concept follows this convention (see package optimistic).
// Bad input is an error matching concurkit.ErrInvalidArgument, returned
// before any I/O.
//
// Three operations, each in every adapter:
//
//   - Insert: insert the row unless its key exists; created reports which.
//     The existing row is left untouched.
//   - Upsert: insert the row, or update the existing row's other columns
//     to the given values; created reports which, and the row as stored
//     afterwards can be read back.
//   - InsertOrGet: insert the row, or return the existing row unchanged;
//     every concurrent caller with the same key gets the same row and
//     exactly one of them gets created == true.
//
// How each server tells created from existing:
//
//   - PostgreSQL: INSERT … ON CONFLICT (key) DO NOTHING (the command tag's
//     row count), ON CONFLICT … DO UPDATE … RETURNING (xmax = 0) (a row
//     version written by an insert has no xmax; an updated one carries the
//     updater's transaction id), and for InsertOrGet one statement:
//     a CTE inserts with DO NOTHING RETURNING, and UNION ALL reads the
//     existing row when the CTE returned nothing. Under READ COMMITTED the
//     statement's snapshot can predate the commit of the row it conflicted
//     with, so the read finds nothing; upsertpg.InsertOrGet then runs the
//     statement again (a fresh snapshot sees the row), up to a bound. In a
//     REPEATABLE READ or SERIALIZABLE transaction PostgreSQL reports that
//     case as a serialization failure (40001) instead, for the caller's
//     retry loop.
//   - MySQL/MariaDB: INSERT … ON DUPLICATE KEY UPDATE, with
//     LAST_INSERT_ID(-1) evaluated in the ON DUPLICATE KEY branch only.
//     The server returns that marker as the statement's last-insert-id when
//     the row existed and something else (0 or the auto-increment value)
//     when it inserted. The affected-rows count (1 inserted, 2 updated, 0
//     unchanged) is not used: with the driver's clientFoundRows option an
//     unchanged existing row also counts 1, indistinguishable from an
//     insert. INSERT IGNORE is not used either: it turns unrelated errors
//     (NOT NULL, truncation, foreign keys) into warnings. Reading the row
//     back is a second statement, a locking read (LOCK IN SHARE MODE), so
//     it sees the latest committed row even inside a REPEATABLE READ
//     transaction whose snapshot is older.
//   - DynamoDB: PutItem with attribute_not_exists(key); InsertOrGet adds
//     ReturnValuesOnConditionCheckFailure ALL_OLD so the existing item
//     comes back in the same call; Upsert is an UpdateItem with
//     ReturnValues ALL_OLD (no old item = created).
//
// Cancellation on MySQL/MariaDB: given a *sql.DB, a write whose context
// ends while it waits for another transaction's lock on the key is stopped
// on the server (KILL QUERY from another pooled connection) before the
// call returns, so it does not happen later behind the caller's back;
// where that cannot be confirmed (a *sql.Conn, an unreachable server) the
// error is a *concurkit.AmbiguousCommitError, which still matches
// context.Canceled.
//
// The key column must be the table's primary key or a unique key, and no
// other unique key may conflict: MySQL's ON DUPLICATE KEY fires for any
// unique key, PostgreSQL's ON CONFLICT (key) raises 23505 for the others.
// Table and column names are validated and quoted; values are bound.
package upsert
