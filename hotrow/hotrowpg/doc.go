// Package hotrowpg is the PostgreSQL (pgx v5) adapter of hotrow: escrow
// updates (Add) and the Store a hotrow.Combiner batches through.
//
// The table needs a unique key column and a NOT NULL bigint value column:
//
//	CREATE TABLE stock (id bigint PRIMARY KEY, v bigint NOT NULL);
//
// Add is one statement on any handle, a caller's transaction included: a
// conditional UPDATE … RETURNING whose affected row decides, with the
// floor and the int64 range checked in numeric arithmetic, so a refused
// update never raises an error that would abort the caller's transaction.
// A miss costs a second statement, which tells ErrNotFound from
// ErrInsufficient and ErrOverflow.
//
// Store.TryAdd is the same statement for a whole batch; Store.Locked is the
// batch's slow path near the floor: one transaction with SELECT … FOR
// UPDATE, the per-request decisions in Go, one UPDATE and one COMMIT.
package hotrowpg
