package inboxmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/internal/spec"
	"github.com/concurkit/concurkit/internal/galera"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqltime"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
)

// pkg names this package in errors.
const pkg = "inboxmysql"

// DBTX is what an inbox runs its transactions on, as for
// pessimisticmysql.InTx: a Beginner (*sql.DB, *sql.Conn), on which Handle
// begins, commits and retries its own transaction, or a *sql.Tx the
// caller opened, in which Handle runs once, in a savepoint, and the
// caller's COMMIT makes the record durable.
type DBTX = sqldb.DBTX

// Beginner starts database/sql transactions: *sql.DB and *sql.Conn.
type Beginner = sqldb.Beginner

var (
	_ DBTX     = (*sql.DB)(nil)
	_ DBTX     = (*sql.Conn)(nil)
	_ DBTX     = (*sql.Tx)(nil)
	_ Beginner = (*sql.DB)(nil)
	_ Beginner = (*sql.Conn)(nil)
)

// Statements; %[1]s is a quoted table name, never a value.
//
// MySQL has no RETURNING and its affected-rows count cannot tell an
// insert from an unchanged duplicate when the DSN sets clientFoundRows, so
// the duplicate branch evaluates LAST_INSERT_ID(-1): the statement's
// last-insert-id is then 2^64-1 (-1 as int64), a value no insert into
// these tables (which have no AUTO_INCREMENT column) reports; see package
// upsert for the same technique. IF evaluates only the branch it takes.
const (
	// recordSQL records the id unless it is there. A concurrent
	// transaction that inserted the same key first makes this statement
	// wait for its end (InnoDB locks the duplicate key): the duplicate
	// branch if it committed, an insert if it rolled back. Arguments:
	// consumer, message id, processed_at.
	recordSQL = `INSERT INTO %[1]s (consumer, message_id, processed_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE message_id = IF(LAST_INSERT_ID(-1), message_id, message_id)`

	// recordWindowSQL: an entry recorded at or before the cutoff (4th
	// argument) is taken over (processed_at moved to now) as if absent;
	// a recent one is a duplicate (the marker).
	recordWindowSQL = `INSERT INTO %[1]s (consumer, message_id, processed_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE processed_at = IF(processed_at <= ?, VALUES(processed_at),
	IF(LAST_INSERT_ID(-1), processed_at, processed_at))`

	// lockSequenceSQL creates the (consumer, producer) row at 0 or
	// X-locks the existing one, and reports the row's highest sequence as
	// the statement's last-insert-id: LAST_INSERT_ID(expr) returns expr
	// and makes it the statement's value; an insert reports 0, which is
	// the new row's last_seq. One round trip instead of an insert and a
	// SELECT … FOR UPDATE. Arguments: consumer, producer, updated_at.
	lockSequenceSQL = `INSERT INTO %[1]s (consumer, producer, last_seq, updated_at) VALUES (?, ?, 0, ?)
ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID(last_seq)`

	// advanceSQL records the new highest sequence on the locked row.
	// Arguments: seq, updated_at, consumer, producer.
	advanceSQL = `UPDATE %[1]s SET last_seq = ?, updated_at = ? WHERE consumer = ? AND producer = ?`

	// Savepoints in a transaction the caller opened; %[1]d is a number
	// unique to the call, so that nested Handles do not replace each
	// other's savepoint (MySQL replaces one of the same name).
	savepointSQL         = "SAVEPOINT ck_inbox_%[1]d"
	rollbackSavepointSQL = "ROLLBACK TO SAVEPOINT ck_inbox_%[1]d"
	releaseSavepointSQL  = "RELEASE SAVEPOINT ck_inbox_%[1]d"

	// reapSQL deletes up to the 2nd argument entries recorded at or
	// before the 1st, oldest first (index on processed_at).
	reapSQL = `DELETE FROM %[1]s WHERE processed_at <= ? ORDER BY processed_at LIMIT ?`
)

// existedMarker is the last-insert-id of the duplicate branch.
const existedMarker = -1

// savepoints numbers the savepoints of this process.
var savepoints atomic.Uint64

// inSavepoint runs fn inside a savepoint of tx, a transaction the caller
// opened: if fn fails or panics, the transaction is rolled back to the
// savepoint (the id's record and fn's writes undone, the caller's own
// writes kept) before the error is returned or the panic re-raised, so a
// caller that commits anyway does not record a message whose handler
// failed. On success the savepoint is released. It is InnoDB's savepoint:
// the row locks taken after it are kept until the caller's transaction
// ends.
//
// A deadlock or a killed connection rolls back the caller's whole
// transaction, savepoint included: the error of the rollback to it is then
// joined to fn's.
func inSavepoint[T any](ctx context.Context, tx *sql.Tx, fn func(ctx context.Context, tx *sql.Tx) (T, error)) (out T, err error) {
	n := savepoints.Add(1)
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(savepointSQL, n)); err != nil {
		return out, fmt.Errorf("%s: savepoint: %w", pkg, err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		// ctx may have ended: the rollback to the savepoint must still
		// happen, bounded.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_, rerr := tx.ExecContext(rctx, fmt.Sprintf(rollbackSavepointSQL, n))
		if p := recover(); p != nil {
			panic(p)
		}
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("%s: rollback to savepoint: %w", pkg, rerr))
		}
	}()
	out, err = fn(ctx, tx)
	if err != nil {
		var zero T
		return zero, err
	}
	done = true
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(releaseSavepointSQL, n)); err != nil {
		var zero T
		return zero, fmt.Errorf("%s: release savepoint: %w", pkg, err)
	}
	return out, nil
}

// rollbackTimeout bounds the rollback to a savepoint after ctx ended.
const rollbackTimeout = 5 * time.Second

// inTx runs fn as pessimisticmysql.InTxValue does: in a transaction of its
// own on a Beginner, and in a savepoint of the caller's *sql.Tx (see
// inSavepoint), where InTxValue alone would leave fn's failed work, and
// the id, for the caller's COMMIT.
//
// causal asks, on a Galera node, for a transaction on a connection that
// first waited until its node applied what the cluster committed before
// (MariaDB does not wait inside a transaction): for decisions taken
// without a write, which certification does not check.
func inTx[T any](ctx context.Context, ib *Inbox, causal bool, fn func(ctx context.Context, tx *sql.Tx) (T, error)) (T, error) {
	if _, ok := ib.db.(*sql.Tx); ok {
		return pessimisticmysql.InTxValue(ctx, ib.db, ib.cfg.TxOptions, func(ctx context.Context, tx *sql.Tx) (T, error) {
			return inSavepoint(ctx, tx, fn)
		})
	}
	db := ib.db
	if causal {
		var zero T
		on, err := ib.galera.On(ctx, db)
		if err != nil {
			return zero, fmt.Errorf("%s: %w", pkg, err)
		}
		if on {
			if pool, ok := db.(*sql.DB); ok {
				conn, err := pool.Conn(ctx)
				if err != nil {
					return zero, fmt.Errorf("%s: %w", pkg, err)
				}
				defer conn.Close()
				db = conn
			}
			if err := galera.Barrier(ctx, db); err != nil {
				return zero, fmt.Errorf("%s: %w", pkg, err)
			}
		}
	}
	return pessimisticmysql.InTxValue(ctx, db, ib.cfg.TxOptions, fn)
}

// errSkip ends a transaction that has nothing to commit (a duplicate, a
// refused gap): it is rolled back, and the caller gets no error.
var errSkip = errors.New("inboxmysql: nothing to apply")

// Inbox records processed message ids in a MariaDB/MySQL table, in the
// transactions of their handlers. Build it with New; it is safe for
// concurrent use and holds no connection of its own.
type Inbox struct {
	db                             DBTX
	cfg                            spec.Resolved
	record, lockSeq, advance, reap string
	galera                         galera.Node
}

// New returns an Inbox that runs its transactions on db, configured by cfg
// (nil = defaults, see inbox.Config). The tables must exist: the toolkit
// migrations create them (package migrations, `concurkit migrate up`).
//
// Errors, before any I/O, match concurkit.ErrInvalidArgument: a nil or
// typed-nil db, a db that is neither a Beginner nor a *sql.Tx, invalid
// table names, a negative Window or ReapBatch, an unknown gap policy.
func New(db DBTX, cfg *inbox.Config) (*Inbox, error) {
	r, err := spec.Resolve(pkg, db, cfg, ident.MySQL)
	if err != nil {
		return nil, err
	}
	switch db.(type) {
	case Beginner, *sql.Tx:
	default:
		return nil, spec.Invalid(pkg, "%T is neither a Beginner (*sql.DB, *sql.Conn) nor a *sql.Tx", db)
	}
	record := recordSQL
	if r.Window > 0 {
		record = recordWindowSQL
	}
	return &Inbox{
		db:      db,
		cfg:     r,
		record:  fmt.Sprintf(record, r.Table),
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
// inserts it and runs fn; the others' INSERT waits on the key's lock and
// then finds the id committed (duplicate) or, if that transaction rolled
// back (fn failed), inserts it and runs fn themselves; InnoDB may pick one
// of several waiters as a deadlock victim then, which is retried. Exactly
// one runs fn's effects.
//
// fn receives the transaction; it must do its writes through it. On a
// Beginner the transaction is retried on deadlocks (Config.TxOptions), so
// fn may run more than once but commits at most once. On a *sql.Tx the
// caller opened, Handle runs once inside it, in a savepoint: if fn fails
// or panics, the transaction is rolled back to the savepoint (the id and
// fn's writes undone, the caller's own writes and InnoDB's row locks
// kept), so a caller that commits anyway has not recorded the id and the
// redelivery runs fn; if fn succeeds, the caller's COMMIT makes both
// durable. (A deadlock rolls back the caller's whole transaction: the
// error says so.)
//
// Errors: before any I/O, inbox.ErrInvalidID (empty, over-long or non
// UTF-8 ids) and concurkit.ErrInvalidArgument (nil fn); fn's own error,
// unchanged, after the rollback (the id is not recorded, so a redelivery
// runs fn again); *concurkit.AmbiguousCommitError when COMMIT's outcome
// is unknown — a redelivery is then safe, it either runs fn or finds the
// id; and the errors of pessimisticmysql.InTx (driver errors wrapped,
// matching ctx.Err() when ctx ended the call).
func (ib *Inbox) Handle(ctx context.Context, consumer, msgID string, fn func(ctx context.Context, tx *sql.Tx) error) (processed bool, err error) {
	if err := spec.IDs(pkg, "consumer", consumer, "message id", msgID); err != nil {
		return false, err
	}
	if err := spec.Fn(pkg, fn); err != nil {
		return false, err
	}
	processed, err = inTx(ctx, ib, false, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		now := ib.cfg.Now()
		args := []any{consumer, msgID, mysqltime.Text(now)}
		if ib.cfg.Window > 0 {
			args = append(args, mysqltime.Text(ib.cfg.Cutoff(now)))
		}
		res, err := tx.ExecContext(ctx, ib.record, args...)
		if err != nil {
			return false, fmt.Errorf("%s: record message %q: %w", pkg, msgID, err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return false, fmt.Errorf("%s: record message %q: %w", pkg, msgID, err)
		}
		if id == existedMarker {
			return false, errSkip
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
// than a gap the result is the zero SeqResult. In a *sql.Tx the caller
// opened, HandleSequence runs in a savepoint as Handle does (a failed fn,
// a duplicate or a refused gap leave the sequence where it was), and the
// producer's row stays locked until that transaction ends, whatever the
// outcome (InnoDB keeps the locks taken after a savepoint).
func (ib *Inbox) HandleSequence(ctx context.Context, consumer, producer string, seq int64, fn func(ctx context.Context, tx *sql.Tx) error) (inbox.SeqResult, error) {
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
	// Causal on Galera: a node that has not applied the producer's last
	// sequence yet would refuse the next one as a gap, a decision that
	// writes nothing and so is not certified.
	_, err := inTx(ctx, ib, true, func(ctx context.Context, tx *sql.Tx) (struct{}, error) {
		now := ib.cfg.Now()
		r, err := tx.ExecContext(ctx, ib.lockSeq, consumer, producer, mysqltime.Text(now))
		if err != nil {
			return struct{}{}, fmt.Errorf("%s: read sequence of producer %q: %w", pkg, producer, err)
		}
		last, err := r.LastInsertId()
		if err != nil {
			return struct{}{}, fmt.Errorf("%s: read sequence of producer %q: %w", pkg, producer, err)
		}
		res = spec.Decide(consumer, producer, last, seq, ib.cfg.Gaps)
		if !res.Applied {
			return struct{}{}, errSkip // nothing to record: roll back the lock (and a new row)
		}
		if _, err := tx.ExecContext(ctx, ib.advance, seq, mysqltime.Text(now), consumer, producer); err != nil {
			return struct{}{}, fmt.Errorf("%s: record sequence %d of producer %q: %w", pkg, seq, producer, err)
		}
		return struct{}{}, fn(ctx, tx)
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
// job).
//
// Errors: concurkit.ErrInvalidArgument when the inbox has no Window
// (entries never expire); otherwise the errors of pessimisticmysql.InTx,
// with the count deleted so far.
func (ib *Inbox) Reap(ctx context.Context) (int64, error) {
	if ib.cfg.Window <= 0 {
		return 0, spec.Invalid(pkg, "Reap needs a Window: without one, ids are kept forever")
	}
	cutoff := ib.cfg.Cutoff(ib.cfg.Now()) // fixed, so that the loop ends
	var total int64
	for {
		n, err := pessimisticmysql.InTxValue(ctx, ib.db, ib.cfg.TxOptions, func(ctx context.Context, tx *sql.Tx) (int64, error) {
			res, err := tx.ExecContext(ctx, ib.reap, mysqltime.Text(cutoff), ib.cfg.ReapBatch)
			if err != nil {
				return 0, fmt.Errorf("%s: reap: %w", pkg, err)
			}
			return res.RowsAffected()
		})
		total += n
		if err != nil || n < int64(ib.cfg.ReapBatch) {
			return total, err
		}
	}
}

// Handle is New(db, nil).Handle: fn runs once per (consumer, msgID), with
// the default table and no dedup window. See Inbox.Handle.
func Handle(ctx context.Context, db DBTX, consumer, msgID string, fn func(ctx context.Context, tx *sql.Tx) error) (processed bool, err error) {
	ib, err := New(db, nil)
	if err != nil {
		return false, err
	}
	return ib.Handle(ctx, consumer, msgID, fn)
}
