// Package optimistic implements optimistic concurrency control with a
// version column: read a row and its version, compute the change, and write
// it back only if the version is still the one that was read
// (compare-and-swap). A writer that lost the race gets ErrConflict and runs
// its read-modify-write again; Do and DoValue do that with retry.Do.
//
// The CAS helpers tell the two ways an update can miss apart in a single
// round trip — ErrConflict (the row exists, its version moved) and
// ErrNotFound (no row has that key) — and return the new version:
//
//   - PostgreSQL (UpdatePostgres, pgx v5): one statement whose CTE runs the
//     UPDATE … RETURNING and whose outer SELECT reports whether the key
//     exists.
//   - MySQL/MariaDB (UpdateMySQL, database/sql): neither server has
//     UPDATE … RETURNING, and the affected-rows count cannot separate the
//     cases (it is 0 for both misses, and with the driver's clientFoundRows
//     option it counts matched rather than changed rows). The statement
//     therefore matches the row by key alone, assigns each column
//     conditionally on the version, and reports the outcome through
//     LAST_INSERT_ID(expr), which the server returns in the OK packet of the
//     same statement: the new version on success, the negated current
//     version on a conflict, and 0 (the function never ran) when no row
//     matched. No multiStatements or interpolateParams DSN option is needed.
//     (One statement; go-sql-driver's default server-side prepare adds a
//     prepare round trip per call unless the DSN sets interpolateParams=true.)
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
// The version column must be a NOT NULL integer (BIGINT; DynamoDB number)
// holding positive values; the helpers set it to expected+1.
package optimistic
