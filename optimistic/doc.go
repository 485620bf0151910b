// Package optimistic implements optimistic concurrency control with a
// version column: read a row and its version, compute the change, and write
// it back only if the version is still the one that was read
// (compare-and-swap). A writer that lost the race gets ErrConflict and runs
// its read-modify-write again; Do and DoValue do that with retry.Do.
//
// The CAS helpers tell the two ways an update can miss apart —
// ErrConflict (the row exists, its version moved) and ErrNotFound (no row
// has that key) — and return the new version, in one round trip on
// success:
//
//   - PostgreSQL (UpdatePostgres, pgx v5): one statement whose CTE runs the
//     UPDATE … RETURNING and whose outer SELECT reports whether the key
//     exists.
//   - MySQL/MariaDB (UpdateMySQL, database/sql): neither server has
//     UPDATE … RETURNING. The statement is the hand-written CAS
//     (UPDATE … WHERE key = ? AND version = ?), one round trip on success
//     whatever the DSN's clientFoundRows setting (a matching row always
//     changes, since its version moves). Only a miss costs a second
//     statement, a locking read of the key, which tells a conflict from a
//     missing row even inside an older REPEATABLE READ snapshot. The
//     session's LAST_INSERT_ID() is not touched. When ctx ends during the
//     statement on a *sql.DB, the statement is stopped on the server
//     (KILL QUERY from another connection) before UpdateMySQL returns;
//     where that cannot be confirmed the error is *AmbiguousCommitError.
//   - DynamoDB (UpdateDynamoDB): UpdateItem with the condition
//     attribute_exists(key) AND version = expected and
//     ReturnValuesOnConditionCheckFailure ALL_OLD: a failed check that
//     returns the old item is a conflict, one that returns nothing means
//     the item is missing.
//
// Each adapter accepts the smallest interface of its driver, so a pool, a
// connection or a transaction all work. Table and column names are
// validated and quoted (see Table); values are always bound parameters.
//
// The version column must be a NOT NULL integer (BIGINT; DynamoDB number);
// the helpers set it to expected+1. Expected versions must be positive and
// below math.MaxInt64 (ErrVersionOverflow): a stored version of 0 or below
// can only conflict.
package optimistic
