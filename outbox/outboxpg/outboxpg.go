package outboxpg

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/internal/spec"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// pkg names this package in errors.
const pkg = "outboxpg"

// DBTX is the pgx v5 query interface Add writes through: pgx.Tx above
// all (the business transaction), but *pgxpool.Pool, *pgxpool.Conn and
// *pgx.Conn satisfy it too.
type DBTX = pgxdb.DBTX

// Beginner is what a Store runs its relay transactions on:
// *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn (or a pgx.Tx, for a savepoint;
// of little use for a relay, whose claims must commit on their own).
type Beginner = pgxdb.Beginner

var (
	_ DBTX          = (*pgxpool.Pool)(nil)
	_ DBTX          = pgx.Tx(nil)
	_ Beginner      = (*pgxpool.Pool)(nil)
	_ Beginner      = (*pgxpool.Conn)(nil)
	_ Beginner      = (*pgx.Conn)(nil)
	_ outbox.Source = (*Store)(nil)
)

// Statements; %[1]s is the quoted table name, never a value.
const (
	insertSQL = `INSERT INTO %[1]s (message_id, topic, message_key, payload, headers, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`

	// claimSQL locks the oldest unpublished rows no other transaction
	// holds. A row another relay published between this statement's
	// snapshot and its lock attempt is re-checked on its newest version
	// (READ COMMITTED) and dropped, so it is not published twice.
	claimSQL = `SELECT id, message_id, topic, message_key, payload, headers, created_at FROM %[1]s
WHERE published_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`

	// markSQL marks the claimed rows published, in the claim's transaction.
	markSQL = `UPDATE %[1]s SET published_at = $2 WHERE id = ANY($1)`

	// reapSQL deletes up to $2 rows published at or before $1, oldest
	// first; SKIP LOCKED lets several reapers share the work.
	reapSQL = `DELETE FROM %[1]s WHERE id IN (
	SELECT id FROM %[1]s WHERE published_at <= $1
	ORDER BY published_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

	pendingSQL = `SELECT count(*) FROM %[1]s WHERE published_at IS NULL`
)

// claimOptions: one attempt. A retried claim would publish its batch
// again; the Relay's own loop retries, with backoff, instead.
var claimOptions = &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1}}

// Store is an outbox in a PostgreSQL table: Add writes messages in
// business transactions, and it is the outbox.Source a Relay publishes
// from. Build it with New; it is safe for concurrent use.
type Store struct {
	db                                 Beginner
	cfg                                spec.Resolved
	insert, claim, mark, reap, pending string
}

// New returns a Store on the outbox table of cfg (nil = defaults, see
// outbox.Config) that runs relay transactions on db. The table must exist:
// the toolkit migrations create it (package migrations).
//
// Errors, before any I/O, match concurkit.ErrInvalidArgument: a nil or
// typed-nil db, an invalid table name, a negative Retention or ReapBatch.
func New(db Beginner, cfg *outbox.Config) (*Store, error) {
	if handle.IsNil(db) {
		return nil, spec.Invalid(pkg, "nil database handle")
	}
	return newStore(db, cfg)
}

func newStore(db Beginner, cfg *outbox.Config) (*Store, error) {
	r, err := spec.Resolve(pkg, cfg, ident.Postgres)
	if err != nil {
		return nil, err
	}
	return &Store{
		db:      db,
		cfg:     r,
		insert:  fmt.Sprintf(insertSQL, r.Table),
		claim:   fmt.Sprintf(claimSQL, r.Table),
		mark:    fmt.Sprintf(markSQL, r.Table),
		reap:    fmt.Sprintf(reapSQL, r.Table),
		pending: fmt.Sprintf(pendingSQL, r.Table),
	}, nil
}

// Add writes msg to the outbox through tx, the business transaction, and
// returns its ID (generated with outbox.NewID when msg.ID is empty): the
// message is published if and only if tx commits. One INSERT; the relays
// see the row once tx has committed.
//
// Errors: before any I/O, an error matching concurkit.ErrInvalidArgument
// for a nil tx and outbox.ErrInvalidMessage for an invalid message; the
// driver's error wrapped as "outboxpg: add message <id>: …".
func (s *Store) Add(ctx context.Context, tx DBTX, msg outbox.Message) (id string, err error) {
	row, err := spec.Prepare(pkg, tx, msg, s.cfg.Now())
	if err != nil {
		return "", err
	}
	m := row.Msg
	if _, err := tx.Exec(ctx, s.insert, m.ID, m.Topic, m.Key, row.Payload, row.Headers, m.CreatedAt); err != nil {
		return "", fmt.Errorf("%s: add message %s: %w", pkg, m.ID, err)
	}
	return m.ID, nil
}

// Add writes msg to the default outbox table (outbox.DefaultTable)
// through tx, the business transaction. See Store.Add.
func Add(ctx context.Context, tx DBTX, msg outbox.Message) (id string, err error) {
	s, err := defaultStore()
	if err != nil {
		return "", err
	}
	return s.Add(ctx, tx, msg)
}

// defaultStore is the Store of the default configuration, without a db:
// Add needs only its statement and clock.
var defaultStore = sync.OnceValues(func() (*Store, error) { return newStore(nil, nil) })

// Claim implements outbox.Source: in one transaction it locks up to n of
// the oldest unpublished rows that no other transaction holds (FOR UPDATE
// SKIP LOCKED), calls publish with their messages (not at all when there
// are none), marks them published (published_at = Now) if publish returns
// nil, and commits. The rows stay locked while publish runs, so
// concurrent relays claim disjoint batches; if publish fails, ctx ends,
// or the relay's connection dies, the transaction rolls back and the rows
// are claimable again at once. A batch whose mark or COMMIT fails after
// publish succeeded is published again later (at least once).
//
// A row that cannot be read into a Message (headers that are not a JSON
// object of strings, written by other code) is handed to publish with its
// batch, flagged with outbox.Message.Malformed, instead of failing the
// claim.
//
// It makes one attempt (a retried claim would publish again): the Relay's
// loop retries. Errors: concurkit.ErrInvalidArgument for n outside
// [1, outbox.MaxBatchSize] or a nil publish; publish's error, unchanged;
// driver errors wrapped; *concurkit.AmbiguousCommitError when COMMIT's
// outcome is unknown.
func (s *Store) Claim(ctx context.Context, n int, publish func(ctx context.Context, msgs []outbox.Message) error) (int, error) {
	if err := spec.Claim(pkg, n, publish); err != nil {
		return 0, err
	}
	return pessimisticpg.InTxValue(ctx, s.db, claimOptions, func(ctx context.Context, tx pgx.Tx) (int, error) {
		msgs, ids, err := s.lock(ctx, tx, n)
		if err != nil || len(msgs) == 0 {
			return 0, err
		}
		if err := publish(ctx, msgs); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, s.mark, ids, s.cfg.Now()); err != nil {
			return 0, fmt.Errorf("%s: mark %d messages published: %w", pkg, len(ids), err)
		}
		return len(msgs), nil
	})
}

// lock claims the batch: its messages and their row ids.
func (s *Store) lock(ctx context.Context, tx pgx.Tx, n int) ([]outbox.Message, []int64, error) {
	rows, err := tx.Query(ctx, s.claim, n)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: claim: %w", pkg, err)
	}
	defer rows.Close()
	var (
		msgs    []outbox.Message
		ids     []int64
		headers []byte
	)
	for rows.Next() {
		var id int64
		var m outbox.Message
		if err := rows.Scan(&id, &m.ID, &m.Topic, &m.Key, &m.Payload, &headers, &m.CreatedAt); err != nil {
			return nil, nil, fmt.Errorf("%s: claim: %w", pkg, err)
		}
		spec.Headers(&m, headers)
		m.CreatedAt = m.CreatedAt.UTC()
		msgs, ids = append(msgs, m), append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: claim: %w", pkg, err)
	}
	return msgs, ids, nil
}

// Reap deletes published rows older than Config.Retention (published at
// or before Now - Retention), Config.ReapBatch per statement and
// transaction, oldest first, and returns how many it deleted. Unpublished
// rows are never deleted. Run it periodically; several reapers may run at
// once.
//
// Errors: the errors of pessimisticpg.InTx, with the count deleted so far.
func (s *Store) Reap(ctx context.Context) (int64, error) {
	cutoff := s.cfg.Now().Add(-s.cfg.Retention) // fixed, so that the loop ends
	var total int64
	for {
		n, err := pessimisticpg.InTxValue(ctx, s.db, nil, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			tag, err := tx.Exec(ctx, s.reap, cutoff, s.cfg.ReapBatch)
			if err != nil {
				return 0, fmt.Errorf("%s: reap: %w", pkg, err)
			}
			return tag.RowsAffected(), nil
		})
		total += n
		if err != nil || n < int64(s.cfg.ReapBatch) {
			return total, err
		}
	}
}

// Pending returns the number of unpublished messages (committed ones; a
// batch being published counts until its relay commits), for monitoring
// the relays' backlog.
func (s *Store) Pending(ctx context.Context) (int64, error) {
	count := func(ctx context.Context, db DBTX) (int64, error) {
		var n int64
		if err := db.QueryRow(ctx, s.pending).Scan(&n); err != nil {
			return 0, fmt.Errorf("%s: count pending: %w", pkg, err)
		}
		return n, nil
	}
	if db, ok := s.db.(DBTX); ok { // every pgx handle: one round trip
		return count(ctx, db)
	}
	return pessimisticpg.InTxValue(ctx, s.db, nil, func(ctx context.Context, tx pgx.Tx) (int64, error) { return count(ctx, tx) })
}
