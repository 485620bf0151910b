// Package fenced makes storage enforce fencing tokens, the rule that makes
// distributed locks safe. It is the driver-neutral core: the Token and
// Source types, the sentinel errors and the Table and Fence descriptions.
// It imports only the standard library; the guarded writes live in one
// adapter per driver family, so a program compiles only the driver it
// uses:
//
//   - fenced/fencedpg: PostgreSQL through pgx v5 (Write, Update, Admit,
//     Sequence);
//   - fenced/fencedmysql: MariaDB/MySQL through database/sql and
//     go-sql-driver/mysql (Write, Update, Admit, Sequence);
//   - fenced/fenceddynamo: DynamoDB through aws-sdk-go-v2 (Put, Counter).
//
// This core-plus-adapters layout (cockroach-go's crdb and crdbpgxv5) is the
// module's convention for every concept: <concept>/ is stdlib-only and
// <concept>/<concept>{pg,mysql,dynamo} adapt it to one driver family.
//
// # The rule
//
// A lock with a time-to-live alone cannot guarantee mutual exclusion: a
// holder paused by garbage collection, a slow network or a clock jump can
// outlive its lease and write after another holder took over (Kleppmann,
// "How to do distributed locking", 2016). Every distlock lease therefore
// carries a Token that is strictly increasing in acquisition order, and
// every guarded write is accepted only if its token is at least the highest
// token the storage has seen for that row or item, which it advances in the
// same statement (one round trip):
//
//	UPDATE t SET …, max_seen_token = $tok WHERE id = $key AND max_seen_token <= $tok
//
// Equal tokens pass (one holder may write many times); a lower token fails
// with ErrStaleToken, so a holder that lost its lock can never overwrite its
// successor's data.
//
// # Fenced and versioned rows
//
// Rows that optimistic compare-and-swap writers also update need the
// fenced writes to bump the version those writers compare: set
// Table.VersionColumn, and every accepted fenced write also increments that
// column (a row it inserts starts at version 1) in the same guarded
// statement. A CAS that read the row before the fenced write then fails
// with a version conflict instead of overwriting it. Without
// VersionColumn, a fenced write is invisible to CAS writers, which then
// silently undo it.
//
// The bump protects the optimistic writers from the fenced one; it does
// not check the version the fenced writer read. A fenced job that computes
// new values from the row (a read-modify-write, such as moving money)
// therefore reads it with SELECT … FOR UPDATE in the transaction of its
// fenced write: concurrent CAS writers queue behind the row lock, then see
// the new version and retry. Read it anywhere else — on the pool, or in a
// READ COMMITTED transaction without FOR UPDATE — and a transfer that
// commits between the read and the fenced write is overwritten by it: the
// token is valid, the write is accepted, and the transfer's change is
// lost (a load test that credited interest this way created money: +1,957
// over 82 runs; the module's TestFencedReadModifyWrite forces the
// interleaving). Lock rows in a fixed order (by key) so jobs and transfers
// do not deadlock. The adapters' TestFencedJobWithCASTransfers run exactly
// this against concurrent two-row transfers and keep the total exact;
// without VersionColumn the same test creates and destroys money.
//
// The one call for "hold a lease, write fenced and versioned" is
// distlock.Do with fencedpg.Update (or fencedmysql.Update) on such a
// Table, given lease.Token(); see fencedpg's ExampleUpdate_withLease.
//
// # Resources outside the database
//
// The guard also protects side effects elsewhere (an e-mail, a call): the
// adapters' Admit checks and advances the token of a named resource in a
// fence table (Fence, default DefaultFenceTable) inside the caller's
// transaction; run the side effect only after that transaction commits.
//
// # Errors
//
// Bad arguments — a nil handle, empty or invalid names, a token ≤ 0 — are
// reported before any I/O by errors matching concurkit.ErrInvalidArgument
// (ErrInvalidToken and ErrTokenOverflow are the more specific ones). A
// refused write is ErrStaleToken, a missing row ErrNotFound (which also
// matches sql.ErrNoRows and pgx.ErrNoRows). Each refused write is reported
// to observe.Hooks.FenceRejected of the call's context.
package fenced
