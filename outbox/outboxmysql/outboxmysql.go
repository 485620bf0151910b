package outboxmysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqltime"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/internal/spec"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

// pkg names this package in errors.
const pkg = "outboxmysql"

// DBTX is the database/sql query interface Add writes through: *sql.Tx
// above all (the business transaction), but *sql.DB and *sql.Conn satisfy
// it too.
type DBTX = sqldb.DBTX

// Beginner starts database/sql transactions: *sql.DB and *sql.Conn. A
// Store's db must be one (and a DBTX).
type Beginner = sqldb.Beginner

var (
	_ DBTX          = (*sql.DB)(nil)
	_ DBTX          = (*sql.Tx)(nil)
	_ Beginner      = (*sql.DB)(nil)
	_ Beginner      = (*sql.Conn)(nil)
	_ outbox.Source = (*Store)(nil)
)

// Statements; %[1]s is the quoted table name, never a value.
const (
	insertSQL = `INSERT INTO %[1]s (message_id, topic, message_key, payload, headers, created_at)
VALUES (?, ?, ?, ?, ?, ?)`

	// claimSQL locks the oldest unpublished rows no other transaction
	// holds, through the (published_at, id) index. A locking read sees
	// the newest committed row version, so a row another relay has just
	// published no longer matches.
	claimSQL = `SELECT id, message_id, topic, message_key, payload, headers, created_at FROM %[1]s
WHERE published_at IS NULL ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`

	// markSQL marks the claimed rows published; %[2]s is one placeholder
	// per row id.
	markSQL = `UPDATE %[1]s SET published_at = ? WHERE id IN (%[2]s)`

	// reapSQL deletes up to the 2nd argument rows published at or before
	// the 1st, oldest first.
	reapSQL = `DELETE FROM %[1]s WHERE published_at <= ? ORDER BY published_at LIMIT ?`

	pendingSQL = `SELECT COUNT(*) FROM %[1]s WHERE published_at IS NULL`
)

// claimOptions: READ COMMITTED, so that the claim's locking read takes no
// gap locks (under REPEATABLE READ, InnoDB's next-key locks on the scanned
// range would block producers' inserts until the batch is published); one
// attempt, because a retried claim would publish its batch again (the
// Relay's loop retries, with backoff).
var claimOptions = &pessimistic.Options{Isolation: sql.LevelReadCommitted, Retry: retry.Policy{MaxAttempts: 1}}

// reapOptions: READ COMMITTED for the same reason.
var reapOptions = &pessimistic.Options{Isolation: sql.LevelReadCommitted}

// Store is an outbox in a MariaDB/MySQL table: Add writes messages in
// business transactions, and it is the outbox.Source a Relay publishes
// from. Build it with New; it is safe for concurrent use.
type Store struct {
	db                                  DBTX
	cfg                                 spec.Resolved
	table, insert, claim, reap, pending string
}

// New returns a Store on the outbox table of cfg (nil = defaults, see
// outbox.Config) that runs relay transactions on db, a *sql.DB or
// *sql.Conn (not a *sql.Tx: a claim commits on its own). The table must
// exist: the toolkit migrations create it (package migrations).
//
// Errors, before any I/O, match concurkit.ErrInvalidArgument: a nil or
// typed-nil db, a db that is not a Beginner, an invalid table name, a
// negative Retention or ReapBatch.
func New(db DBTX, cfg *outbox.Config) (*Store, error) {
	if handle.IsNil(db) {
		return nil, spec.Invalid(pkg, "nil database handle")
	}
	if _, ok := db.(Beginner); !ok {
		return nil, spec.Invalid(pkg, "%T is not a Beginner (*sql.DB, *sql.Conn): a relay's claims commit on their own", db)
	}
	return newStore(db, cfg)
}

func newStore(db DBTX, cfg *outbox.Config) (*Store, error) {
	r, err := spec.Resolve(pkg, cfg, ident.MySQL)
	if err != nil {
		return nil, err
	}
	return &Store{
		db:      db,
		cfg:     r,
		table:   r.Table,
		insert:  fmt.Sprintf(insertSQL, r.Table),
		claim:   fmt.Sprintf(claimSQL, r.Table),
		reap:    fmt.Sprintf(reapSQL, r.Table),
		pending: fmt.Sprintf(pendingSQL, r.Table),
	}, nil
}

// Add writes msg to the outbox through tx, the business transaction, and
// returns its ID (generated with outbox.NewID when msg.ID is empty): the
// message is published if and only if tx commits. One INSERT. Given a
// *sql.DB (autocommit, no business transaction) the insert goes through
// the module's cancellation guard: a context that ends while it waits is
// stopped on the server, or reported as an *concurkit.AmbiguousCommitError.
//
// Errors: before any I/O, an error matching concurkit.ErrInvalidArgument
// for a nil tx and outbox.ErrInvalidMessage for an invalid message; the
// driver's error wrapped as "outboxmysql: add message <id>: …".
func (s *Store) Add(ctx context.Context, tx DBTX, msg outbox.Message) (id string, err error) {
	row, err := spec.Prepare(pkg, tx, msg, s.cfg.Now())
	if err != nil {
		return "", err
	}
	m := row.Msg
	if _, err := mysqlcancel.Exec(ctx, tx, s.insert, m.ID, m.Topic, m.Key, row.Payload, row.Headers, mysqltime.Text(m.CreatedAt)); err != nil {
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

// Claim implements outbox.Source: in one READ COMMITTED transaction it
// locks up to n of the oldest unpublished rows that no other transaction
// holds (FOR UPDATE SKIP LOCKED), calls publish with their messages (not
// at all when there are none), marks them published (published_at = Now)
// if publish returns nil, and commits. The rows stay locked while publish
// runs, so concurrent relays claim disjoint batches; if publish fails,
// ctx ends, or the relay's connection dies, the transaction rolls back
// and the rows are claimable again. A batch whose mark or COMMIT fails
// after publish succeeded is published again later (at least once).
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
	return pessimisticmysql.InTxValue(ctx, s.db, claimOptions, func(ctx context.Context, tx *sql.Tx) (int, error) {
		msgs, ids, err := s.lock(ctx, tx, n)
		if err != nil || len(msgs) == 0 {
			return 0, err
		}
		if err := publish(ctx, msgs); err != nil {
			return 0, err
		}
		args := append([]any{mysqltime.Text(s.cfg.Now())}, ids...)
		mark := fmt.Sprintf(markSQL, s.table, strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", "))
		if _, err := tx.ExecContext(ctx, mark, args...); err != nil {
			return 0, fmt.Errorf("%s: mark %d messages published: %w", pkg, len(ids), err)
		}
		return len(msgs), nil
	})
}

// lock claims the batch: its messages and their row ids.
func (s *Store) lock(ctx context.Context, tx *sql.Tx, n int) ([]outbox.Message, []any, error) {
	rows, err := tx.QueryContext(ctx, s.claim, n)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: claim: %w", pkg, err)
	}
	defer rows.Close()
	var (
		msgs    []outbox.Message
		ids     []any
		headers []byte
	)
	for rows.Next() {
		var id int64
		var m outbox.Message
		var created mysqltime.Time
		if err := rows.Scan(&id, &m.ID, &m.Topic, &m.Key, &m.Payload, &headers, &created); err != nil {
			return nil, nil, fmt.Errorf("%s: claim: %w", pkg, err)
		}
		spec.Headers(&m, headers)
		if m.Payload == nil {
			m.Payload = []byte{}
		}
		m.CreatedAt = created.T
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
// rows are never deleted. Run it periodically.
//
// Errors: the errors of pessimisticmysql.InTx, with the count deleted so
// far.
func (s *Store) Reap(ctx context.Context) (int64, error) {
	cutoff := s.cfg.Now().Add(-s.cfg.Retention) // fixed, so that the loop ends
	var total int64
	for {
		n, err := pessimisticmysql.InTxValue(ctx, s.db, reapOptions, func(ctx context.Context, tx *sql.Tx) (int64, error) {
			res, err := tx.ExecContext(ctx, s.reap, mysqltime.Text(cutoff), s.cfg.ReapBatch)
			if err != nil {
				return 0, fmt.Errorf("%s: reap: %w", pkg, err)
			}
			return res.RowsAffected()
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
	var n int64
	if err := s.db.QueryRowContext(ctx, s.pending).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: count pending: %w", pkg, err)
	}
	return n, nil
}
