package inboxpg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/internal/spec"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// pkg names this package in errors.
const pkg = "inboxpg"

// Beginner is what an inbox runs its transactions on, in pgx's own shape
// (the db of pgx.BeginFunc): *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn,
// on which Handle begins, commits and retries its own transaction, and
// pgx.Tx, a transaction the caller opened, in which Handle runs once
// inside a savepoint and the caller's COMMIT makes the record durable (see
// pessimisticpg.InTx).
type Beginner = pgxdb.Beginner

var (
	_ Beginner = (*pgxpool.Pool)(nil)
	_ Beginner = (*pgxpool.Conn)(nil)
	_ Beginner = (*pgx.Conn)(nil)
	_ Beginner = pgx.Tx(nil)
)

// Statements; %[1]s is a quoted table name, never a value.
const (
	// recordSQL records the id unless it is there. A concurrent
	// transaction that inserted the same key first makes this statement
	// wait for its end: DO NOTHING if it committed, insert if it rolled
	// back. Arguments: consumer, message id, processed_at.
	recordSQL = `INSERT INTO %[1]s (consumer, message_id, processed_at) VALUES ($1, $2, $3)
ON CONFLICT (consumer, message_id) DO NOTHING`

	// recordWindowSQL is recordSQL with a dedup window: an entry recorded
	// at or before the cutoff ($4) is taken over (its processed_at moved
	// to now) as if it were absent. The WHERE is evaluated on the newest
	// committed row, also after waiting for a concurrent writer.
	recordWindowSQL = `INSERT INTO %[1]s AS i (consumer, message_id, processed_at) VALUES ($1, $2, $3)
ON CONFLICT (consumer, message_id) DO UPDATE SET processed_at = EXCLUDED.processed_at
WHERE i.processed_at <= $4`

	// lockSequenceSQL creates the (consumer, producer) row at 0 or locks
	// the existing one, and returns its highest sequence, in one
	// statement: the no-op DO UPDATE takes the row lock that serialises
	// messages of one producer. Arguments: consumer, producer, updated_at.
	lockSequenceSQL = `INSERT INTO %[1]s AS s (consumer, producer, last_seq, updated_at) VALUES ($1, $2, 0, $3)
ON CONFLICT (consumer, producer) DO UPDATE SET last_seq = s.last_seq
RETURNING last_seq`

	// settleSQL locks a recorded id (a duplicate's). A lock is a write:
	// the transaction's commit waits for the WAL flush and, with
	// synchronous replication, for the synchronous standbys, and it comes
	// after the commit that recorded the id. So a duplicate is reported —
	// and the transport told to drop the message — only once the record
	// is durable. Without it, a record whose commit was still waiting for
	// the standby when its session was terminated or its statement
	// cancelled (then committed on the primary alone) made a redelivery a
	// duplicate, and a failover lost the record, its effects and the
	// message. HandleSequence commits its lock of the producer's row for
	// a duplicate for the same reason.
	settleSQL = `SELECT 1 FROM %[1]s WHERE consumer = $1 AND message_id = $2 FOR KEY SHARE`

	// advanceSQL records seq ($3) as the highest applied, on the row
	// lockSequenceSQL locked.
	advanceSQL = `UPDATE %[1]s SET last_seq = $3, updated_at = $4 WHERE consumer = $1 AND producer = $2`

	// reapSQL deletes up to $2 entries recorded at or before $1, oldest
	// first. SKIP LOCKED leaves alone an entry a Handle is taking over
	// right now; the outer re-check drops one taken over in between.
	reapSQL = `DELETE FROM %[1]s WHERE (consumer, message_id) IN (
	SELECT consumer, message_id FROM %[1]s WHERE processed_at <= $1
	ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)
AND processed_at <= $1`
)

// errSkip ends a transaction that has nothing to commit (a duplicate, a
// refused gap): it is rolled back, and the caller gets no error.
var errSkip = errors.New("inboxpg: nothing to apply")

// Inbox records processed message ids in a PostgreSQL table, in the
// transactions of their handlers. Build it with New; it is safe for
// concurrent use and holds no connection of its own.
type Inbox struct {
	db                                     Beginner
	cfg                                    spec.Resolved
	record, settle, lockSeq, advance, reap string
}

// New returns an Inbox that runs its transactions on db, configured by cfg
// (nil = defaults, see inbox.Config). The tables must exist: the toolkit
// migrations create them (package migrations, `concurkit migrate up`).
//
// Errors, before any I/O, match concurkit.ErrInvalidArgument: a nil or
// typed-nil db, invalid table names, a negative Window or ReapBatch, an
// unknown gap policy.
func New(db Beginner, cfg *inbox.Config) (*Inbox, error) {
	r, err := spec.Resolve(pkg, db, cfg, ident.Postgres)
	if err != nil {
		return nil, err
	}
	record := recordSQL
	if r.Window > 0 {
		record = recordWindowSQL
	}
	return &Inbox{
		db:      db,
		cfg:     r,
		record:  fmt.Sprintf(record, r.Table),
		settle:  fmt.Sprintf(settleSQL, r.Table),
		lockSeq: fmt.Sprintf(lockSequenceSQL, r.SequenceTable),
		advance: fmt.Sprintf(advanceSQL, r.SequenceTable),
		reap:    fmt.Sprintf(reapSQL, r.Table),
	}, nil
}

// Handle runs fn exactly once per (consumer, msgID): in one transaction it
// records the id and runs fn, so the record commits if and only if fn's
// effects do. It returns processed == true when fn ran and committed, and
// (false, nil) for a duplicate: an id already recorded (within the Window,
// if one is configured), in which case fn is not run.
//
// Concurrent deliveries of one id serialise on the id's key: the first
// inserts it and runs fn; the others' INSERT waits for that transaction
// and then finds the id committed (duplicate) or, if it rolled back
// (fn failed), inserts it and runs fn themselves. Exactly one runs fn's
// effects.
//
// fn receives the transaction; it must do its writes through it (effects
// outside the database cannot be undone when the transaction rolls back:
// give them an idempotency key of their own, such as msgID). On a pool or
// connection the transaction is retried on deadlocks and serialization
// failures (Config.TxOptions), so fn may run more than once but commits
// at most once. On a pgx.Tx the caller opened, Handle runs in a savepoint
// and the caller's COMMIT makes both durable.
//
// Errors: before any I/O, inbox.ErrInvalidID (empty, over-long or non
// UTF-8 ids) and concurkit.ErrInvalidArgument (nil fn); fn's own error,
// unchanged, after the rollback (the id is not recorded, so a redelivery
// runs fn again); *concurkit.AmbiguousCommitError when COMMIT's outcome
// is unknown — a redelivery is then safe, it either runs fn or finds the
// id; and the errors of pessimisticpg.InTx (driver errors wrapped,
// matching ctx.Err() when ctx ended the call).
func (ib *Inbox) Handle(ctx context.Context, consumer, msgID string, fn func(ctx context.Context, tx pgx.Tx) error) (processed bool, err error) {
	if err := spec.IDs(pkg, "consumer", consumer, "message id", msgID); err != nil {
		return false, err
	}
	if err := spec.Fn(pkg, fn); err != nil {
		return false, err
	}
	processed, err = pessimisticpg.InTxValue(ctx, ib.db, ib.cfg.TxOptions, func(ctx context.Context, tx pgx.Tx) (bool, error) {
		now := ib.cfg.Now()
		args := []any{consumer, msgID, now}
		if ib.cfg.Window > 0 {
			args = append(args, ib.cfg.Cutoff(now))
		}
		tag, err := tx.Exec(ctx, ib.record, args...)
		if err != nil {
			return false, fmt.Errorf("%s: record message %q: %w", pkg, msgID, err)
		}
		if tag.RowsAffected() == 0 {
			// A duplicate: commit a lock on the recorded id (see settleSQL).
			if _, err := tx.Exec(ctx, ib.settle, consumer, msgID); err != nil {
				return false, fmt.Errorf("%s: settle duplicate %q: %w", pkg, msgID, err)
			}
			return false, nil
		}
		if err := fn(ctx, tx); err != nil {
			return false, err
		}
		return true, nil
	})
	if errors.Is(err, errSkip) {
		return false, nil
	}
	return processed, err
}

// HandleSequence applies messages of one producer in sequence order, each
// once, like the broker side of Kafka's idempotent producer: for every
// (consumer, producer) it keeps the highest sequence applied, last, and
// in one transaction locks that row, decides, and runs fn:
//
//   - seq <= last: a duplicate (or an older message): fn is not run;
//     result.Duplicate() is true and the error nil.
//   - seq == last+1: fn runs and seq becomes the highest, committed
//     together; result.Applied is true.
//   - seq > last+1: the sequences last+1 … seq-1 are missing
//     (result.Gap). Under inbox.RefuseGaps (the default) fn is not run and
//     the error is that *inbox.GapError (matching inbox.ErrSequenceGap):
//     give the message back to the transport to be delivered again later.
//     Under inbox.ApplyGaps fn runs, seq becomes the highest, and the gap
//     is only reported.
//
// Sequences start at 1 for each (consumer, producer). The producer id must
// name one sequence: a producer that restarts from 1 must use a new id
// (add an epoch or session id to it), or its messages are dropped as
// duplicates. Messages of one producer serialise on its row; different
// producers run in parallel. Transactions, fn and the errors are as for
// Handle, plus concurkit.ErrInvalidArgument for seq < 1. On an error other
// than a gap the result is the zero SeqResult. In a pgx.Tx the caller
// opened, an applied message keeps the producer's row locked until that
// transaction ends (a duplicate or refused one rolls back its savepoint).
func (ib *Inbox) HandleSequence(ctx context.Context, consumer, producer string, seq int64, fn func(ctx context.Context, tx pgx.Tx) error) (inbox.SeqResult, error) {
	if err := spec.IDs(pkg, "consumer", consumer, "producer", producer); err != nil {
		return inbox.SeqResult{}, err
	}
	if err := spec.Seq(pkg, seq); err != nil {
		return inbox.SeqResult{}, err
	}
	if err := spec.Fn(pkg, fn); err != nil {
		return inbox.SeqResult{}, err
	}
	var res inbox.SeqResult
	err := pessimisticpg.InTx(ctx, ib.db, ib.cfg.TxOptions, func(ctx context.Context, tx pgx.Tx) error {
		now := ib.cfg.Now()
		var last int64
		if err := tx.QueryRow(ctx, ib.lockSeq, consumer, producer, now).Scan(&last); err != nil {
			return fmt.Errorf("%s: read sequence of producer %q: %w", pkg, producer, err)
		}
		res = spec.Decide(consumer, producer, last, seq, ib.cfg.Gaps)
		if res.Duplicate() {
			return nil // commit the lock, a write, so that the duplicate settles (see settleSQL)
		}
		if !res.Applied {
			return errSkip // a refused gap: roll back the lock (and a new row)
		}
		if _, err := tx.Exec(ctx, ib.advance, consumer, producer, seq, now); err != nil {
			return fmt.Errorf("%s: record sequence %d of producer %q: %w", pkg, seq, producer, err)
		}
		return fn(ctx, tx)
	})
	switch {
	case errors.Is(err, errSkip):
		if res.Gap != nil {
			return res, res.Gap
		}
		return res, nil
	case err != nil:
		return inbox.SeqResult{}, err
	}
	return res, nil
}

// Reap deletes the entries that have expired (recorded Window or longer
// ago by the Now clock), Config.ReapBatch rows per statement and
// transaction, oldest first, until none is left, and returns how many it
// deleted. Entries are reaped for space only: Handle already treats an
// expired entry as absent. Run it periodically (a time.Ticker, a cron
// job); several reapers may run at once (SKIP LOCKED).
//
// Errors: concurkit.ErrInvalidArgument when the inbox has no Window
// (entries never expire); otherwise the errors of pessimisticpg.InTx,
// with the count deleted so far.
func (ib *Inbox) Reap(ctx context.Context) (int64, error) {
	if ib.cfg.Window <= 0 {
		return 0, spec.Invalid(pkg, "Reap needs a Window: without one, ids are kept forever")
	}
	cutoff := ib.cfg.Cutoff(ib.cfg.Now()) // fixed, so that the loop ends
	var total int64
	for {
		n, err := pessimisticpg.InTxValue(ctx, ib.db, ib.cfg.TxOptions, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			tag, err := tx.Exec(ctx, ib.reap, cutoff, ib.cfg.ReapBatch)
			if err != nil {
				return 0, fmt.Errorf("%s: reap: %w", pkg, err)
			}
			return tag.RowsAffected(), nil
		})
		total += n
		if err != nil || n < int64(ib.cfg.ReapBatch) {
			return total, err
		}
	}
}

// Handle is New(db, nil).Handle: fn runs once per (consumer, msgID), with
// the default table and no dedup window. See Inbox.Handle.
func Handle(ctx context.Context, db Beginner, consumer, msgID string, fn func(ctx context.Context, tx pgx.Tx) error) (processed bool, err error) {
	ib, err := New(db, nil)
	if err != nil {
		return false, err
	}
	return ib.Handle(ctx, consumer, msgID, fn)
}
