// Package sagapg is the PostgreSQL (pgx v5) store of package saga: Store
// keeps saga instances in the table concurkit_sagas of the toolkit
// migrations (0004_saga), one row per instance, and implements saga.Store
// with one statement per call: Claim is an INSERT … ON CONFLICT DO UPDATE
// … WHERE the lease is free, Save and Extend are UPDATEs conditional on
// the runner's claim. Load and Unfinished read instances for inspection
// and recovery jobs.
//
// The handle is a DBTX: give it a *pgxpool.Pool. Each record must commit
// at once, so never a transaction (its commit would come after the steps
// it records); a single *pgx.Conn works for one Run at a time only.
//
// The package imports pgx and the standard library, nothing of the MySQL
// driver or the AWS SDK.
package sagapg
