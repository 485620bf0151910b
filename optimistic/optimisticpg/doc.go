// Package optimisticpg is the PostgreSQL (pgx v5) adapter of package
// optimistic: Update is the version-checked compare-and-swap of one row,
// in one statement and one round trip — the hand-written UPDATE … WHERE
// key = $1 AND version = $2. The types, sentinels and the retry
// loop are in optimistic; multi-row work goes inside
// pessimisticpg.InTx, which retries optimistic.ErrConflict.
//
// Only a miss pays for telling a conflict (the row exists, its version
// moved) from a missing row: a second statement reads whether the key
// exists. (An earlier single statement — a CTE whose outer SELECT ran an
// EXISTS on every call — cost about 1.1× the hand-written CAS.) Both
// statements are built, validated and quoted once per (Table, set columns)
// and cached; pgx's own statement cache then prepares them once per
// connection.
//
// The package imports pgx and the standard library, nothing of the MySQL
// driver or the AWS SDK.
package optimisticpg
