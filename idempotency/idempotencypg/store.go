package idempotencypg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/internal/wire"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

const pkg = "idempotencypg"

// DBTX is the pgx v5 query interface (the shape of sqlc's DBTX):
// *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy it. Give
// the Store a pool: its claims and completions are single statements in
// autocommit mode, meant to commit at once, not in a caller's transaction.
type DBTX = pgxdb.DBTX

// Beginner starts pgx transactions: *pgxpool.Pool, *pgxpool.Conn and
// *pgx.Conn. Advance (DoPhases) needs the Store's DBTX to be one.
type Beginner = pgxdb.Beginner

var (
	_ DBTX     = (*pgxpool.Pool)(nil)
	_ Beginner = (*pgxpool.Pool)(nil)

	_ idempotency.TxStore[pgx.Tx] = (*Store)(nil)
)

// Config configures a Store. A nil *Config, and every zero field, means
// the documented default.
type Config struct {
	// Table is the key table; the zero value is idempotency.DefaultTable
	// in the connection's search_path, as created by the toolkit
	// migrations (migrations.Up). Another name needs the same columns.
	Table idempotency.Table
}

// Store keeps idempotency keys in a PostgreSQL table. It implements
// idempotency.Store (for idempotency.Middleware, Do and Reap) and
// idempotency.TxStore[pgx.Tx] (for DoPhases). It is safe for concurrent
// use.
type Store struct {
	db Beginner
	q  DBTX
	s  statements
}

// statements are the SQL texts with the table name filled in.
type statements struct {
	claim, read, settle, complete, release, advance, touch, reap string
}

// New returns a Store on db, which should be a *pgxpool.Pool. It does no
// I/O. Errors match concurkit.ErrInvalidArgument: a nil or typed-nil db,
// an invalid table name.
func New(db DBTX, cfg *Config) (*Store, error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%w: %s: nil db", concurkit.ErrInvalidArgument, pkg)
	}
	var t idempotency.Table
	if cfg != nil {
		t = cfg.Table
	}
	if t.Name == "" {
		t.Name = wire.DefaultTable
	}
	parts := []string{t.Name}
	if t.Schema != "" {
		parts = []string{t.Schema, t.Name}
	}
	table, err := ident.Postgres(parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: table: %v", concurkit.ErrInvalidArgument, pkg, err)
	}
	st := &Store{q: db}
	st.db, _ = db.(Beginner)
	f := func(q string) string { return fmt.Sprintf(q, table) }
	st.s = statements{
		claim: f(claimSQL), read: f(readSQL), settle: f(settleSQL), complete: f(completeSQL), release: f(releaseSQL),
		advance: f(advanceSQL), touch: f(touchSQL), reap: f(reapSQL),
	}
	return st, nil
}

// columns is a key row as Claim returns it.
const columns = `principal, idempotency_key, fingerprint, lock_id, attempts, locked_at, recovery_point,
	response_status, response_headers, response_body, created_at, last_run_at, expires_at`

// claimSQL claims a key in one statement. $1 principal, $2 key, $3
// fingerprint, $4 lock id, $5 now, $6 stale (now - lock timeout), $7
// expires at.
//
// cur reads the row in the statement's snapshot. If it is there and may
// not be claimed (finished, locked by a live run, another fingerprint),
// nothing is inserted: a replay or a 409 is one read, no write, no row
// lock. Otherwise the INSERT runs: a new key is inserted; an existing one
// (claimable in the snapshot, or inserted by a concurrent claim since)
// goes to ON CONFLICT, which locks the newest version of the row and
// re-checks the condition on it, so of two concurrent claims exactly one
// updates it and the other gets no row from claimed. The final SELECT
// returns the claimed row, else the snapshot's row. No row at all means
// the row was committed by a concurrent claim after our snapshot: Claim
// then reads it (readSQL).
const claimSQL = `WITH cur AS (
	SELECT ` + columns + ` FROM %[1]s WHERE principal = $1::text AND idempotency_key = $2::text
), claimed AS (
	INSERT INTO %[1]s AS k (principal, idempotency_key, fingerprint, lock_id, attempts, locked_at,
		recovery_point, created_at, last_run_at, expires_at)
	SELECT $1::text, $2::text, $3::bytea, $4::bigint, 1, $5::timestamptz, 'started', $5::timestamptz, $5::timestamptz, $7::timestamptz
	WHERE NOT EXISTS (SELECT FROM cur WHERE NOT (cur.expires_at <= $5::timestamptz OR (cur.fingerprint = $3::bytea
		AND cur.recovery_point <> 'finished' AND (cur.locked_at IS NULL OR cur.locked_at <= $6::timestamptz))))
	ON CONFLICT (principal, idempotency_key) DO UPDATE SET
		fingerprint = EXCLUDED.fingerprint,
		lock_id = EXCLUDED.lock_id,
		attempts = CASE WHEN k.expires_at <= EXCLUDED.locked_at THEN 1 ELSE k.attempts + 1 END,
		locked_at = EXCLUDED.locked_at,
		recovery_point = CASE WHEN k.expires_at <= EXCLUDED.locked_at THEN 'started' ELSE k.recovery_point END,
		response_status = NULL, response_headers = NULL, response_body = NULL,
		created_at = CASE WHEN k.expires_at <= EXCLUDED.locked_at THEN EXCLUDED.created_at ELSE k.created_at END,
		last_run_at = EXCLUDED.last_run_at,
		expires_at = EXCLUDED.expires_at
	WHERE k.expires_at <= EXCLUDED.locked_at OR (k.fingerprint = EXCLUDED.fingerprint
		AND k.recovery_point <> 'finished' AND (k.locked_at IS NULL OR k.locked_at <= $6::timestamptz))
	RETURNING ` + columns + `
)
SELECT ` + columns + ` FROM claimed
UNION ALL
SELECT ` + columns + ` FROM cur WHERE NOT EXISTS (SELECT FROM claimed)`

// readSQL reads a key row (after a claim lost a race it could not see).
const readSQL = `SELECT ` + columns + ` FROM %s WHERE principal = $1 AND idempotency_key = $2`

// completeSQL stores the response and unlocks, fenced by the lock id.
const completeSQL = `UPDATE %s SET locked_at = NULL, recovery_point = 'finished',
	response_status = $4, response_headers = $5, response_body = $6, expires_at = $7
	WHERE principal = $1 AND idempotency_key = $2 AND lock_id = $3 AND locked_at IS NOT NULL`

// releaseSQL unlocks, keeping the recovery point, fenced by the lock id.
const releaseSQL = `UPDATE %s SET locked_at = NULL
	WHERE principal = $1 AND idempotency_key = $2 AND lock_id = $3 AND locked_at IS NOT NULL`

// advanceSQL moves the recovery point and refreshes the lock (a phase).
const advanceSQL = `UPDATE %s SET recovery_point = $4, locked_at = $5, expires_at = $6
	WHERE principal = $1 AND idempotency_key = $2 AND lock_id = $3 AND locked_at IS NOT NULL`

// touchSQL refreshes the lock (before the last phase).
const touchSQL = `UPDATE %s SET locked_at = $4, expires_at = $5
	WHERE principal = $1 AND idempotency_key = $2 AND lock_id = $3 AND locked_at IS NOT NULL`

// reapSQL deletes a batch of expired keys, oldest first; SKIP LOCKED
// passes over rows a claim (or another reaper) holds, and FOR UPDATE
// re-checks the expiry on the row's newest version, so a key a claim just
// renewed is not deleted.
const reapSQL = `DELETE FROM %[1]s WHERE (principal, idempotency_key) IN (
	SELECT principal, idempotency_key FROM %[1]s WHERE expires_at <= $1
	ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

// claimAttempts bounds the rounds of Claim: a round ends without an
// answer only if the row was deleted (reaped) between the claim and the
// read, which cannot repeat often.
const claimAttempts = 5

// retrySerialization runs fn, a single autocommit statement, again after a
// serialization failure (40001), which it gets when the session's default
// isolation is REPEATABLE READ or SERIALIZABLE and a concurrent claim
// changed the row after the statement's snapshot: the failed statement
// changed nothing, and the next one takes a new snapshot that sees the
// other claim's row. Under READ COMMITTED (the server's default) it never
// retries.
func retrySerialization(ctx context.Context, fn func(ctx context.Context) error) error {
	return retry.Do(ctx, retry.Policy{Retryable: func(err error) bool {
		return sqlerr.Classify(err) == sqlerr.Serialization
	}}, fn)
}

// Claim implements idempotency.Store: one statement, plus a read only when
// a concurrent claim created the row after the statement's snapshot.
func (s *Store) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.Record, error) {
	for range claimAttempts {
		var rec idempotency.Record
		var ok bool
		err := retrySerialization(ctx, func(ctx context.Context) (err error) {
			rec, ok, err = scanRecord(s.q.QueryRow(ctx, s.s.claim, r.Principal, r.Key, r.Fingerprint, r.LockID, r.Now, r.Stale(), r.ExpiresAt()))
			return err
		})
		if err != nil {
			return rec, wire.Err(ctx, pkg, "claim", err)
		}
		if !ok {
			if rec, ok, err = scanRecord(s.q.QueryRow(ctx, s.s.read, r.Principal, r.Key)); err != nil {
				return rec, wire.Err(ctx, pkg, "claim: read", err)
			}
		}
		if ok {
			if rec.Response != nil {
				if err := s.settle(ctx, r); err != nil {
					return idempotency.Record{}, wire.Err(ctx, pkg, "claim: replay", err)
				}
			}
			return rec, nil
		}
	}
	return idempotency.Record{}, fmt.Errorf("%s: claim: key %q keeps disappearing (reaped while claimed?)", pkg, r.Key)
}

// settleSQL takes a key-share lock on the key row in a transaction of its
// own: a lock is a write (a WAL record, a transaction id), so its commit
// waits, as every writing commit does, for the WAL to be flushed and, with
// synchronous replication, for the synchronous standbys to have it. (A
// transaction id alone would not do: PostgreSQL commits a transaction that
// wrote no WAL without waiting.) KEY SHARE blocks no completion, release
// or phase of the key.
const settleSQL = `SELECT 1 FROM %s WHERE principal = $1 AND idempotency_key = $2 FOR KEY SHARE`

// settle returns once the key row the session read is durable: on the
// primary's disk and, with synchronous replication, on its synchronous
// standbys. A replay needs it. A completion becomes visible on the primary
// before the standby has it when the wait of its commit is cut short (its
// session terminated, its statement cancelled: PostgreSQL's "canceling
// wait for synchronous replication" warning); a replay of it would hand
// the client a response that a failover then loses. The lock's commit
// comes after the completion's in the WAL, so its wait covers it. One
// flushed commit per replay; claims and completions, which write, wait
// anyway.
func (s *Store) settle(ctx context.Context, r idempotency.ClaimRequest) error {
	_, err := s.q.Exec(ctx, s.s.settle, r.Principal, r.Key)
	return err
}

// scanRecord scans one key row; ok is false when there was none.
func scanRecord(row pgx.Row) (idempotency.Record, bool, error) {
	var (
		rec      idempotency.Record
		lockedAt *time.Time
		status   *int32
		headers  []byte
		body     []byte
	)
	err := row.Scan(&rec.Principal, &rec.Key, &rec.Fingerprint, &rec.LockID, &rec.Attempts, &lockedAt,
		&rec.RecoveryPoint, &status, &headers, &body, &rec.CreatedAt, &rec.LastRunAt, &rec.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	if lockedAt != nil {
		rec.LockedAt = *lockedAt
	}
	if status != nil {
		h, err := wire.ParseHeader(headers)
		if err != nil {
			return rec, false, err
		}
		rec.Response = &idempotency.Response{Status: int(*status), Header: h, Body: body}
	}
	return rec, true, nil
}

// fenced runs a write fenced by the lock id: no row changed means the
// lock was lost.
func fenced(ctx context.Context, db DBTX, op, sql string, args ...any) error {
	var tag pgconn.CommandTag
	exec := func(ctx context.Context) (err error) {
		tag, err = db.Exec(ctx, sql, args...)
		return err
	}
	var err error
	if _, inTx := db.(pgx.Tx); inTx {
		err = exec(ctx) // a phase: pessimisticpg.InTx retries the transaction
	} else {
		err = retrySerialization(ctx, exec)
	}
	if err != nil {
		return wire.Err(ctx, pkg, op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %s: %w", pkg, op, idempotency.ErrLockLost)
	}
	return nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, l idempotency.Lock, resp idempotency.Response, expiresAt time.Time) error {
	return complete(ctx, s.q, s.s.complete, l, resp, expiresAt)
}

func complete(ctx context.Context, db DBTX, sql string, l idempotency.Lock, resp idempotency.Response, expiresAt time.Time) error {
	h, err := wire.Header(resp.Header)
	if err != nil {
		return fmt.Errorf("%s: complete: %w", pkg, err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{} // an empty body, not NULL
	}
	return fenced(ctx, db, "complete", sql, l.Principal, l.Key, l.ID, resp.Status, h, body, expiresAt)
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, l idempotency.Lock) error {
	return fenced(ctx, s.q, "release", s.s.release, l.Principal, l.Key, l.ID)
}

// Reap implements idempotency.Store.
func (s *Store) Reap(ctx context.Context, now time.Time, limit int) (int, error) {
	var tag pgconn.CommandTag
	err := retrySerialization(ctx, func(ctx context.Context) (err error) {
		tag, err = s.q.Exec(ctx, s.s.reap, now, limit)
		return err
	})
	if err != nil {
		return 0, wire.Err(ctx, pkg, "reap", err)
	}
	return int(tag.RowsAffected()), nil
}

// Advance implements idempotency.TxStore with pessimisticpg.InTx, which
// retries the transaction (fn included) after a deadlock or serialization
// failure. The key's row is updated first, so the phase holds the row
// lock while fn runs: a claim that would take the key over waits, then
// sees the refreshed lock.
func (s *Store) Advance(ctx context.Context, l idempotency.Lock, point string, now, expiresAt time.Time, fn func(ctx context.Context, tx pgx.Tx) (*idempotency.Response, error)) error {
	if s.db == nil {
		return fmt.Errorf("%w: %s: phases need a db that begins transactions (a *pgxpool.Pool), not %T", concurkit.ErrInvalidArgument, pkg, s.q)
	}
	if fn == nil {
		return fmt.Errorf("%w: %s: nil function", concurkit.ErrInvalidArgument, pkg)
	}
	return pessimisticpg.InTx(ctx, s.db, nil, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if point == idempotency.Finished {
			err = fenced(ctx, tx, "advance", s.s.touch, l.Principal, l.Key, l.ID, now, expiresAt)
		} else {
			err = fenced(ctx, tx, "advance", s.s.advance, l.Principal, l.Key, l.ID, point, now, expiresAt)
		}
		if err != nil {
			return err
		}
		resp, err := fn(ctx, tx)
		if err != nil || point != idempotency.Finished {
			return err
		}
		if resp == nil {
			return fmt.Errorf("%w: %s: the last phase returned no response", concurkit.ErrInvalidArgument, pkg)
		}
		return complete(ctx, tx, s.s.complete, l, *resp, expiresAt)
	})
}
