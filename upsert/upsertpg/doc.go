// Package upsertpg is the PostgreSQL (pgx v5) adapter of package upsert:
// Insert, Upsert and InsertOrGet, each one statement, report whether the
// call created the row. Table, ErrContended and MaxReadAttempts are in
// upsert; see its documentation for how PostgreSQL tells a created row
// from an existing one.
//
// The package imports pgx and the standard library, nothing of the MySQL
// driver or the AWS SDK.
package upsertpg
