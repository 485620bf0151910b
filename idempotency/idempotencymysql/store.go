package idempotencymysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/internal/wire"
	"github.com/concurkit/concurkit/internal/galera"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/mysqltime"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

const pkg = "idempotencymysql"

// DBTX is the database/sql query interface: *sql.DB, *sql.Conn and
// *sql.Tx satisfy it. Give the Store a *sql.DB: its claims and
// completions are autocommit statements, meant to commit at once, and
// with a *sql.DB a claim that the caller's context interrupts is stopped
// on the server (KILL QUERY) rather than left to commit later.
type DBTX = sqldb.DBTX

var (
	_ DBTX = (*sql.DB)(nil)

	_ idempotency.TxStore[*sql.Tx] = (*Store)(nil)
)

// Config configures a Store. A nil *Config, and every zero field, means
// the documented default.
type Config struct {
	// Table is the key table; the zero value is idempotency.DefaultTable
	// in the connection's database, as created by the toolkit migrations
	// (migrations.Up). Another name needs the same columns.
	Table idempotency.Table
}

// Store keeps idempotency keys in a MariaDB or MySQL (InnoDB) table. It
// implements idempotency.Store (for idempotency.Middleware, Do and Reap)
// and idempotency.TxStore[*sql.Tx] (for DoPhases). It is safe for
// concurrent use.
type Store struct {
	db DBTX
	s  statements
	// gs are the statements for a Galera node: s with the claim, its
	// read, complete and release causal (see package galera).
	gs     statements
	galera galera.Node
	// maxPacket caches the server's max_allowed_packet, read when a
	// response first needs it; 0 until then.
	maxPacket atomic.Int64
}

type statements struct {
	claim, read, complete, release, check, advance, touch, reap string
}

// New returns a Store on db, which should be a *sql.DB. It does no I/O.
// Errors match concurkit.ErrInvalidArgument: a nil or typed-nil db, an
// invalid table name.
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
	table, err := ident.MySQL(parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: table: %v", concurkit.ErrInvalidArgument, pkg, err)
	}
	f := func(q string) string { return fmt.Sprintf(q, table) }
	st := statements{
		claim: f(claimSQL), read: f(readSQL), complete: f(completeSQL), release: f(releaseSQL),
		check: f(checkSQL), advance: f(advanceSQL), touch: f(touchSQL), reap: f(reapSQL),
	}
	gs := st
	gs.claim = galera.Causal(st.claim, galera.Insert)
	gs.read = galera.Causal(st.read, galera.Read)
	gs.complete = galera.Causal(st.complete, galera.Update)
	gs.release = galera.Causal(st.release, galera.Update)
	return &Store{db: db, s: st, gs: gs}, nil
}

// statements returns the statements for the store's server: on a Galera
// node (asked once) the claim, the read after it, complete and release
// wait until the node has applied what the cluster committed before them.
// Without that wait each may run on a node that has not yet applied the
// commit just before it on another node: the read after a claim would
// not find the claim (a 409 for the key's own claimant, which then stays
// locked until LockTimeout), a completion would not find its lock
// (ErrLockLost, or 1213 when it meets the claim being applied: the work
// done, its result not stored, and run again after LockTimeout), and a
// retry would be answered 409 for a key another node completed.
func (s *Store) statements(ctx context.Context) (*statements, error) {
	on, err := s.galera.On(ctx, s.db)
	if err != nil {
		return nil, err
	}
	if on {
		return &s.gs, nil
	}
	return &s.s, nil
}

const columns = `principal, idempotency_key, fingerprint, lock_id, attempts, locked_at, recovery_point,
	response_status, response_headers, response_body, created_at, last_run_at, expires_at`

// claimSQL inserts the key or, on a duplicate, claims the existing row if
// claimable, in one statement; readSQL then tells the outcome (MySQL has
// no RETURNING, and the affected-rows count depends on the DSN's
// clientFoundRows). InnoDB runs ON DUPLICATE KEY UPDATE on the newest
// committed row under an exclusive row lock, so of concurrent claims of a
// key exactly one sets its lock id; a claim of a fresh key waits for the
// inserting transaction and then finds the row locked.
//
// The assignments give the same result whichever way the server evaluates
// them: left to right, each seeing the assignments before it (MySQL, and
// MariaDB's default), or all from the row's old values (MariaDB's
// sql_mode SIMULTANEOUS_ASSIGNMENT). The first sets lock_id to this call's
// id if the row is claimable (claimable reads only columns assigned later);
// every other assignment tests ours = "lock_id = <our id> OR claimable".
// Left to right, lock_id = <our id> is then the first assignment's result;
// simultaneously, the old lock_id is never our fresh random id, so ours is
// claimable on the old row. And when the row is not claimable, no
// assignment changes anything, so claimable reads the same (false) all the
// way. expires_at is assigned last, so the tests of the old expiry (a key
// that expired restarts) read the old value either way.
//
// Arguments: see claimArgs.
const claimSQL = `INSERT INTO %s (principal, idempotency_key, fingerprint, lock_id, attempts, locked_at,
	recovery_point, created_at, last_run_at, expires_at)
VALUES (?, ?, ?, ?, 1, ?, 'started', ?, ?, ?)
ON DUPLICATE KEY UPDATE
	lock_id = IF(` + claimable + `, ?, lock_id),
	attempts = IF(` + ours + `, IF(expires_at <= ?, 1, attempts + 1), attempts),
	response_status = IF(` + ours + `, NULL, response_status),
	response_headers = IF(` + ours + `, NULL, response_headers),
	response_body = IF(` + ours + `, NULL, response_body),
	created_at = IF(` + ours + ` AND expires_at <= ?, ?, created_at),
	last_run_at = IF(` + ours + `, ?, last_run_at),
	fingerprint = IF(` + ours + `, ?, fingerprint),
	recovery_point = IF(` + ours + ` AND expires_at <= ?, 'started', recovery_point),
	locked_at = IF(` + ours + `, ?, locked_at),
	expires_at = IF(` + ours + `, ?, expires_at)`

// claimable is the claim condition on the existing row: expired, or the
// same request, not finished, and not locked or its lock timed out.
// Arguments: now, fingerprint, stale.
const claimable = `(expires_at <= ? OR (fingerprint = ? AND recovery_point <> 'finished' AND (locked_at IS NULL OR locked_at <= ?)))`

// ours says the row is (being) claimed by this call. Arguments: lock id,
// then claimable's.
const ours = `(lock_id = ? OR ` + claimable + `)`

// claimArgs are the arguments of claimSQL, in order.
func claimArgs(r idempotency.ClaimRequest) []any {
	now, stale, exp, id, fp := mysqltime.Text(r.Now), mysqltime.Text(r.Stale()), mysqltime.Text(r.ExpiresAt()), r.LockID, r.Fingerprint
	ours := []any{id, now, fp, stale}
	args := []any{
		r.Principal, r.Key, fp, id, now, now, now, exp, // VALUES
		now, fp, stale, id, // lock_id
	}
	args = append(append(args, ours...), now)      // attempts
	args = append(args, ours...)                   // response_status
	args = append(args, ours...)                   // response_headers
	args = append(args, ours...)                   // response_body
	args = append(append(args, ours...), now, now) // created_at
	args = append(append(args, ours...), now)      // last_run_at
	args = append(append(args, ours...), fp)       // fingerprint
	args = append(append(args, ours...), now)      // recovery_point
	args = append(append(args, ours...), now)      // locked_at
	return append(append(args, ours...), exp)      // expires_at
}

const readSQL = `SELECT ` + columns + ` FROM %s WHERE principal = ? AND idempotency_key = ?`

// completeSQL and releaseSQL always change a row they match (locked_at
// goes to NULL), so "no row affected" means the lock was lost whatever
// the DSN's clientFoundRows.
const completeSQL = `UPDATE %s SET locked_at = NULL, recovery_point = 'finished',
	response_status = ?, response_headers = ?, response_body = ?, expires_at = ?
	WHERE principal = ? AND idempotency_key = ? AND lock_id = ? AND locked_at IS NOT NULL`

const releaseSQL = `UPDATE %s SET locked_at = NULL
	WHERE principal = ? AND idempotency_key = ? AND lock_id = ? AND locked_at IS NOT NULL`

// checkSQL locks the key row in a phase's transaction if the lock is
// still ours: an UPDATE that changes nothing (same time, same point)
// would report no row, so the fence is this read.
const checkSQL = `SELECT 1 FROM %s WHERE principal = ? AND idempotency_key = ? AND lock_id = ? AND locked_at IS NOT NULL FOR UPDATE`

const advanceSQL = `UPDATE %s SET recovery_point = ?, locked_at = ?, expires_at = ?
	WHERE principal = ? AND idempotency_key = ?`

const touchSQL = `UPDATE %s SET locked_at = ?, expires_at = ? WHERE principal = ? AND idempotency_key = ?`

// reapSQL deletes a batch of expired keys, oldest first, through the
// expires_at index. A key a claim renewed meanwhile is re-checked by
// InnoDB on its newest version and kept.
const reapSQL = `DELETE FROM %s WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`

// claimAttempts bounds the rounds of Claim: a round ends without an
// answer only if the row was deleted (reaped) between the claim and the
// read.
const claimAttempts = 5

// Claim implements idempotency.Store: the upsert (retried after a
// deadlock, which InnoDB may pick when claims race a reaper), then a read.
func (s *Store) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.Record, error) {
	st, err := s.statements(ctx)
	if err != nil {
		return idempotency.Record{}, wire.Err(ctx, pkg, "claim", err)
	}
	args := claimArgs(r)
	for range claimAttempts {
		err := retry.Do(ctx, retry.Policy{}, func(ctx context.Context) error {
			_, err := mysqlcancel.Exec(ctx, s.db, st.claim, args...)
			return err
		})
		if err != nil {
			return idempotency.Record{}, wire.Err(ctx, pkg, "claim", err)
		}
		rec, ok, err := scanRecord(s.db.QueryRowContext(ctx, st.read, r.Principal, r.Key))
		if err != nil {
			return rec, wire.Err(ctx, pkg, "claim: read", err)
		}
		if ok {
			return rec, nil
		}
	}
	return idempotency.Record{}, fmt.Errorf("%s: claim: key %q keeps disappearing (reaped while claimed?)", pkg, r.Key)
}

func scanRecord(row *sql.Row) (idempotency.Record, bool, error) {
	var (
		rec                          idempotency.Record
		lockedAt, created, last, exp mysqltime.Time
		status                       sql.NullInt64
		headers, body                []byte
	)
	err := row.Scan(&rec.Principal, &rec.Key, &rec.Fingerprint, &rec.LockID, &rec.Attempts, &lockedAt,
		&rec.RecoveryPoint, &status, &headers, &body, &created, &last, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	rec.LockedAt, rec.CreatedAt, rec.LastRunAt, rec.ExpiresAt = lockedAt.T, created.T, last.T, exp.T
	if status.Valid {
		h, err := wire.ParseHeader(headers)
		if err != nil {
			return rec, false, err
		}
		rec.Response = &idempotency.Response{Status: int(status.Int64), Header: h, Body: body}
	}
	return rec, true, nil
}

// fenced runs a fenced autocommit write (or one in tx): no row changed
// means the lock was lost. An autocommit write (not in a *sql.Tx) that a
// deadlock or, on Galera, a certification failure rolled back (1213:
// nothing was written) is run again.
func fenced(ctx context.Context, db DBTX, op, query string, args ...any) error {
	var res sql.Result
	exec := func(ctx context.Context) (err error) {
		res, err = mysqlcancel.Exec(ctx, db, query, args...)
		return err
	}
	err := exec(ctx)
	if _, inTx := db.(*sql.Tx); !inTx && err != nil && retry.IsRetryable(err) {
		err = retry.Do(ctx, retry.Policy{}, exec)
	}
	if err != nil {
		return wire.Err(ctx, pkg, op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return wire.Err(ctx, pkg, op, err)
	} else if n == 0 {
		return fmt.Errorf("%s: %s: %w", pkg, op, idempotency.ErrLockLost)
	}
	return nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, l idempotency.Lock, resp idempotency.Response, expiresAt time.Time) error {
	st, err := s.statements(ctx)
	if err != nil {
		return wire.Err(ctx, pkg, "complete", err)
	}
	return s.complete(ctx, s.db, st.complete, l, resp, expiresAt)
}

func (s *Store) complete(ctx context.Context, db DBTX, query string, l idempotency.Lock, resp idempotency.Response, expiresAt time.Time) error {
	h, err := wire.Header(resp.Header)
	if err != nil {
		return fmt.Errorf("%s: complete: %w", pkg, err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{} // an empty body, not NULL
	}
	if err := s.fits(ctx, len(body)+len(h)+len(l.Principal)+len(l.Key)); err != nil {
		return err
	}
	err = fenced(ctx, db, "complete", query, resp.Status, h, body, mysqltime.Text(expiresAt), l.Principal, l.Key, l.ID)
	if me, ok := errors.AsType[*mysql.MySQLError](err); (ok && me.Number == erNetPacketTooLarge) || errors.Is(err, mysql.ErrPktTooLarge) {
		return fmt.Errorf("%s: complete: %w: %w", pkg, idempotency.ErrResponseTooLarge, err)
	}
	return err
}

// Packet sizes. A statement travels in one packet of at most the server's
// max_allowed_packet (MariaDB's default 16 MiB, MySQL's 64 MiB), which
// fits checks before sending a large response: a server that refuses a
// packet closes the connection, and the driver then reports a reset
// connection, not why. Values are counted twice: with interpolateParams
// they travel escaped in the statement's text, up to twice their size
// (TestPacketTooLargeEscaped). Values that small always fit are not
// checked; the statement's text and other values take statementOverhead.
// The server's error 1153 (ER_NET_PACKET_TOO_LARGE), should the server
// answer it, is recognised too.
const (
	alwaysFits          = 32 << 10
	statementOverhead   = 4 << 10
	erNetPacketTooLarge = 1153
	maxPacketQuery      = "SELECT @@max_allowed_packet"
)

// fits returns an error matching idempotency.ErrResponseTooLarge when
// values of n bytes do not fit in a statement.
func (s *Store) fits(ctx context.Context, n int) error {
	if n <= alwaysFits {
		return nil
	}
	limit := s.maxPacket.Load()
	if limit == 0 {
		if err := s.db.QueryRowContext(ctx, maxPacketQuery).Scan(&limit); err != nil {
			return nil // the write itself will tell
		}
		s.maxPacket.Store(limit)
	}
	if 2*int64(n)+statementOverhead > limit {
		return fmt.Errorf("%s: complete: %w: %d bytes, the server's max_allowed_packet is %d", pkg, idempotency.ErrResponseTooLarge, n, limit)
	}
	return nil
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, l idempotency.Lock) error {
	st, err := s.statements(ctx)
	if err != nil {
		return wire.Err(ctx, pkg, "release", err)
	}
	return fenced(ctx, s.db, "release", st.release, l.Principal, l.Key, l.ID)
}

// Reap implements idempotency.Store.
func (s *Store) Reap(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int64
	err := retry.Do(ctx, retry.Policy{}, func(ctx context.Context) error {
		res, err := mysqlcancel.Exec(ctx, s.db, s.s.reap, mysqltime.Text(now), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, wire.Err(ctx, pkg, "reap", err)
	}
	return int(n), nil
}

// Advance implements idempotency.TxStore with pessimisticmysql.InTx, which
// retries the transaction (fn included) after a deadlock. The key's row is
// locked and checked first (SELECT … FOR UPDATE), so the phase holds it
// while fn runs: a claim that would take the key over waits, then sees
// the refreshed lock.
//
// On a Galera node the transaction runs on a connection that first waits
// until its node has applied what the cluster committed before (the
// claim, the previous phase, wherever they ran): MariaDB does not wait
// inside a transaction, and a check on a node that has not applied the
// claim yet would report ErrLockLost for the key's own holder.
func (s *Store) Advance(ctx context.Context, l idempotency.Lock, point string, now, expiresAt time.Time, fn func(ctx context.Context, tx *sql.Tx) (*idempotency.Response, error)) error {
	if fn == nil {
		return fmt.Errorf("%w: %s: nil function", concurkit.ErrInvalidArgument, pkg)
	}
	db := s.db
	if _, inTx := db.(*sql.Tx); !inTx {
		on, err := s.galera.On(ctx, db)
		if err != nil {
			return wire.Err(ctx, pkg, "advance", err)
		}
		if on {
			if pool, ok := db.(*sql.DB); ok {
				conn, err := pool.Conn(ctx)
				if err != nil {
					return wire.Err(ctx, pkg, "advance", err)
				}
				defer conn.Close()
				db = conn
			}
			if err := galera.Barrier(ctx, db); err != nil {
				return wire.Err(ctx, pkg, "advance", err)
			}
		}
	}
	return pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, s.s.check, l.Principal, l.Key, l.ID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s: advance: %w", pkg, idempotency.ErrLockLost)
		}
		if err != nil {
			return mysqlerr.Mark(err)
		}
		if point == idempotency.Finished {
			_, err = tx.ExecContext(ctx, s.s.touch, mysqltime.Text(now), mysqltime.Text(expiresAt), l.Principal, l.Key)
		} else {
			_, err = tx.ExecContext(ctx, s.s.advance, point, mysqltime.Text(now), mysqltime.Text(expiresAt), l.Principal, l.Key)
		}
		if err != nil {
			return mysqlerr.Mark(err)
		}
		resp, err := fn(ctx, tx)
		if err != nil || point != idempotency.Finished {
			return err
		}
		if resp == nil {
			return fmt.Errorf("%w: %s: the last phase returned no response", concurkit.ErrInvalidArgument, pkg)
		}
		return s.complete(ctx, tx, s.s.complete, l, *resp, expiresAt)
	})
}
