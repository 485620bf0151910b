// Package optimistic implements optimistic concurrency control with a
// version column: read a row and its version, compute the change, and write
// it back only if the version is still the one that was read
// (compare-and-swap).
//
// Several rows that must change together (a transfer between two
// accounts) are not several optimistic.Do loops: a retry of the second
// row's CAS cannot undo the first row's write, and money is created or
// destroyed. Do the reads and every CAS inside one transaction with
// pessimisticpg.InTx (PostgreSQL) or pessimisticmysql.InTx (MySQL/MariaDB):
// an optimistic.ErrConflict from any CAS rolls the whole transaction back
// and InTx runs it again, as it does for deadlocks and serialization
// failures. See the Transfer example.
//
// A writer that lost the race gets ErrConflict and runs its
// read-modify-write again; Do and DoValue do that for one row with
// retry.Do.
//
// # Layout: one core, one adapter per driver family
//
// This package is the driver-neutral core: Table, the sentinels
// (ErrConflict, ErrNotFound, ErrVersionOverflow) and the retry loop (Do,
// DoValue). It imports only the standard library and stdlib-only concurkit
// packages. The compare-and-swap itself lives in one thin adapter per
// driver family, each with the same function, so a program compiles only
// the driver it uses:
//
//   - optimisticpg.Update (pgx v5): the hand-written UPDATE … WHERE
//     key = $1 AND version = $2, one round trip on success; a miss costs
//     a second statement, a read of whether the key exists, to tell a
//     conflict from a missing row.
//   - optimisticmysql.Update (database/sql + go-sql-driver/mysql): the
//     hand-written UPDATE … WHERE key = ? AND version = ?, one round trip
//     on success; a miss costs a second statement, a read of the key (a
//     locking read on a *sql.Tx or *sql.Conn, which may be inside an
//     older REPEATABLE READ snapshot; a plain one on a *sql.DB). A
//     cancelled statement is stopped on the server (KILL QUERY) before
//     Update returns, or the error is a *concurkit.AmbiguousCommitError.
//   - optimisticdynamo.Update (aws-sdk-go-v2): one conditional
//     UpdateItem whose ALL_OLD failure tells a conflict from a missing
//     item.
//
// Every concurkit concept follows this convention: <concept>/ is the core,
// <concept>/<concept>pg, <concept>mysql and <concept>dynamo are the
// adapters, and adapter functions carry no driver suffix.
//
// The adapters tell the two ways an update can miss apart — ErrConflict
// (the row exists, its version moved) and ErrNotFound (no row has that
// key) — and return the new version. Each accepts the smallest interface
// of its driver (DBTX, Client), so a pool, a connection or a transaction
// all work. Table and column names are validated and quoted; values are
// always bound parameters. Every ErrConflict is reported to the
// observe.Hooks of the call's context (Conflict, with the adapter's
// package and the table name); without hooks that costs nothing.
//
// The version column must be a NOT NULL integer (BIGINT; DynamoDB number);
// the adapters set it to expected+1. Expected versions must be positive and
// below math.MaxInt64 (ErrVersionOverflow): a stored version of 0 or below
// can only conflict. Bad input is an error matching
// concurkit.ErrInvalidArgument, returned before any I/O.
package optimistic
