// Package hotrow takes a hot row past the ceiling of one commit per update.
//
// On one contended row every interactive strategy (optimistic CAS, SELECT …
// FOR UPDATE, a single conditional UPDATE) pays one transaction, one commit
// and, on PostgreSQL, one row lock held across one log flush per logical
// update. The only way past that ceiling is to change the shape of the
// work. This package does it for commutative updates of one integer column
// (counters, stock, balances with a floor):
//
//   - Escrow: a decrement is one conditional statement (UPDATE … SET v = v +
//     $delta WHERE key = $1 AND v + $delta >= $floor); the affected-row count
//     decides; no read, no version, no retry. Store.Add in the adapters.
//   - Combining: concurrent updates of one key from one process are
//     coalesced (flat combining): while one batch is at the database the
//     next requests queue, and the batch after it carries all of them in one
//     statement and one commit. Each caller still gets its own answer: the
//     value right after its update, or ErrInsufficient for exactly the
//     decrements that did not fit above the floor, in arrival order.
//     Combiner.
//   - Batched transfers (the ledger case): concurrent transfers between
//     accounts go in batches, one transaction per batch, which locks every
//     account it touches in key order (batches of Ledgers in other
//     processes cannot deadlock with it) and applies each transfer in
//     arrival order with its own no-overdraft check. Ledger.
//   - Sharded counters: a counter split over N shard rows; a writer adds
//     to one shard at random, a read sums them; Take, the stock variant,
//     never takes the sum below zero and borrows between shards only when
//     one runs dry. Sharded.
//   - Adaptive mode (MOCC, Wang and Kimura, VLDB 2016): a decaying
//     per-key conflict count in a fixed-size sketch decides, per key,
//     between optimistic and pessimistic control. Cold keys are read with
//     their version and written with a compare-and-swap; hot keys are
//     locked before they are read (or sent to a Combiner, when the update
//     commutes); after a conflict the operation runs again with all its
//     keys locked in key order (the retrospective lock list), so a retry
//     cannot lose the same race or deadlock. Adaptive. With
//     Table.VersionColumn the adapters' writes bump the version the
//     compare-and-swap checks, so batches and optimistic writers can share
//     a row.
//
// The adapters hotrowpg (pgx v5) and hotrowmysql (database/sql, MariaDB and
// MySQL) implement Store, LedgerStore and ShardStore for a table with a key column and
// an integer value column.
//
// # What a caller is told
//
// A caller is answered only after its batch committed (the value) or
// definitely did not (the error). A batch whose commit outcome is unknown
// (the connection broke, the batch timeout ended it) fails every request
// in it with a *concurkit.AmbiguousCommitError. A caller whose context ends
// while its request waits for a batch is removed from the queue and told so
// (ctx.Err() joined with ErrNotApplied); once its request is in a batch at
// the database, it is told the outcome is unknown (an
// *concurkit.AmbiguousCommitError wrapping ctx.Err()). No request is ever
// applied twice: a batch is sent again only when the database answered
// that it rolled it back (hotrowmysql: a deadlock victim, or on a Galera
// cluster a batch another node's write beat at certification), never
// after an unknown outcome.
//
// # Where it works
//
// The Combiner and the Ledger batch within one process: a key updated from many
// processes gets one batch per process at a time, which still divides the
// commits by the batch size. It is not for updates inside a caller's own
// transaction: the batch commits on its own, so a caller that rolls back
// afterwards cannot take its update back (a transfer that must commit with
// other writes of the caller belongs in the caller's transaction, without
// a Ledger). Store.Add (escrow) does run
// inside a caller's transaction.
package hotrow
