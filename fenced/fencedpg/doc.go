// Package fencedpg is the PostgreSQL (pgx v5) adapter of package fenced:
// writes on a caller's table that the database refuses when their fencing
// token is lower than one it has already seen, a fence table for side
// effects outside the database, and a sequence that mints tokens.
//
//   - Write (an upsert) and Update (an existing row) run one guarded
//     statement; with fenced.Table.VersionColumn set they also increment
//     the row's version, so optimistic compare-and-swap writers on the
//     same rows see the fenced write as a conflict.
//   - Admit checks and advances a resource's token in a fence table inside
//     the caller's transaction.
//   - Sequence (NewSequence, CreateSequence) is a fenced.Source for locks
//     that cannot mint tokens themselves (Redis, Redlock).
//
// Every function takes a DBTX, so a pool, a connection or a transaction
// all work. Identifiers are validated and quoted; values are always bind
// parameters. Each statement is built once per (table, assigned columns)
// and cached, so a guarded write costs the client no more than the
// hand-written statement it replaces.
//
// In a REPEATABLE READ (or SERIALIZABLE) transaction that meets a row a
// successor changed after the snapshot, PostgreSQL refuses the guarded
// statement with a serialization failure (SQLSTATE 40001) instead of
// fenced.ErrStaleToken: retry the transaction, and its fresh snapshot then
// gets fenced.ErrStaleToken.
//
// The package links pgx only: no MySQL driver, no AWS SDK.
package fencedpg
