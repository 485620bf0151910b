// Package optimisticpg is the PostgreSQL (pgx v5) adapter of package
// optimistic: Update is the version-checked compare-and-swap of one row,
// in one statement and one round trip. The types, sentinels and the retry
// loop are in optimistic; multi-row work goes inside
// pessimisticpg.InTx, which retries optimistic.ErrConflict.
//
// The statement is a CTE whose UPDATE … RETURNING writes the row and whose
// outer SELECT reports whether the key exists, so a miss tells a conflict
// (the row exists, its version moved) from a missing row without a second
// round trip. It is built, validated and quoted once per (Table, set
// columns) and cached; pgx's own statement cache then prepares it once per
// connection.
//
// The package imports pgx and the standard library, nothing of the MySQL
// driver or the AWS SDK.
package optimisticpg
