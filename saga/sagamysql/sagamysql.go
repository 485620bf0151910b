package sagamysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver this adapter is for

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/galera"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqltime"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/saga"
)

// DBTX is the part of a *sql.DB that the store uses: *sql.DB
// (recommended) and *sql.Conn satisfy it. It is the same interface as every
// other concurkit MySQL adapter's DBTX.
type DBTX = sqldb.DBTX

var (
	_ DBTX       = (*sql.DB)(nil)
	_ DBTX       = (*sql.Conn)(nil)
	_ saga.Store = (*Store)(nil)
)

// Config configures a Store. A nil *Config means the defaults.
type Config struct {
	// Table is the instances table. The zero Table is saga.DefaultTable,
	// concurkit_sagas, in the connection's database.
	Table saga.Table
}

// Store is a saga.Store on MariaDB/MySQL. It is safe for concurrent use.
type Store struct {
	db DBTX
	s  statements
	// gs are the statements for a Galera node: s made causal (see
	// statements).
	gs     statements
	galera galera.Node
}

type statements struct {
	claim, load, save, extend, unfinished, delete string
}

// SQL templates; %[1]s is the quoted table, never a value. The status
// literals are saga.Running and saga.Compensating (unfinished) and
// saga.Completed and saga.Compensated (finished). Times are UTC text.
const (
	columns = "saga_key, definition, definition_version, input, input_hash, status, steps, last_error, claim, lease_until, created_at, updated_at"
	// Read back as text: the DSN's parseTime and loc must not matter.
	selected = "saga_key, definition, definition_version, input, input_hash, status, steps, last_error, claim, " +
		"CAST(lease_until AS CHAR), CAST(created_at AS CHAR), CAST(updated_at AS CHAR)"
	// myClaim inserts the instance or, if it exists unfinished with its
	// lease free or ended, takes the lease. Every assignment repeats the
	// condition, which reads only status (never assigned) and lease_until
	// (assigned last), so each one sees the row's old values whatever the
	// sql_mode: MySQL evaluates the assignments left to right, each seeing
	// the ones before it, but MariaDB's SIMULTANEOUS_ASSIGNMENT evaluates
	// all of them on the old row, and a test of "claim = ours" after
	// setting claim would then never take the lease (two runners both
	// claimed one saga). Whether the claim is ours is read back with
	// myLoad: the affected-rows count depends on the DSN's clientFoundRows.
	myClaimFree = "status IN ('running', 'compensating') AND (lease_until IS NULL OR lease_until <= ?)"
	myClaim     = "INSERT INTO %[1]s (" + columns + ", revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)\n" +
		"ON DUPLICATE KEY UPDATE\n" +
		"claim = IF(" + myClaimFree + ", ?, claim),\n" +
		"revision = IF(" + myClaimFree + ", revision + 1, revision),\n" +
		"updated_at = IF(" + myClaimFree + ", ?, updated_at),\n" +
		"lease_until = IF(" + myClaimFree + ", ?, lease_until)"
	myLoad = "SELECT " + selected + " FROM %[1]s WHERE saga_key = ?"
	// mySave and myExtend are fenced by the claim; revision always
	// changes, so a matched row counts as affected whatever
	// clientFoundRows says.
	mySave = "UPDATE %[1]s SET status = ?, steps = ?, last_error = ?, lease_until = ?, updated_at = ?, revision = revision + 1 " +
		"WHERE saga_key = ? AND claim = ?"
	myExtend     = "UPDATE %[1]s SET lease_until = ?, revision = revision + 1 WHERE saga_key = ? AND claim = ?"
	myUnfinished = "SELECT " + selected + " FROM %[1]s WHERE status IN ('running', 'compensating') AND (lease_until IS NULL OR lease_until <= ?) " +
		"ORDER BY updated_at, saga_key LIMIT ?"
	myDelete = "DELETE FROM %[1]s WHERE status IN ('completed', 'compensated') AND updated_at < ? ORDER BY updated_at LIMIT ?"
)

// New returns a Store on db. It returns an error matching
// concurkit.ErrInvalidArgument for a nil db or an invalid table name.
// It does not check that the table exists: apply the toolkit migrations
// (migrations.Up) first.
func New(db DBTX, cfg *Config) (*Store, error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%w: sagamysql: nil db", concurkit.ErrInvalidArgument)
	}
	if _, ok := db.(*sql.Tx); ok {
		return nil, fmt.Errorf("%w: sagamysql: a *sql.Tx would record nothing until it commits: give a *sql.DB", concurkit.ErrInvalidArgument)
	}
	var t saga.Table
	if cfg != nil {
		t = cfg.Table
	}
	if t.Name == "" {
		t.Name = saga.DefaultTable
	}
	parts := []string{t.Name}
	if t.Schema != "" {
		parts = []string{t.Schema, t.Name}
	}
	table, err := ident.MySQL(parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: sagamysql: table: %w", concurkit.ErrInvalidArgument, err)
	}
	f := func(q string) string { return fmt.Sprintf(q, table) }
	st := statements{claim: f(myClaim), load: f(myLoad), save: f(mySave), extend: f(myExtend),
		unfinished: f(myUnfinished), delete: f(myDelete)}
	return &Store{db: db, s: st, gs: statements{
		claim:      galera.Causal(st.claim, galera.Insert),
		load:       galera.Causal(st.load, galera.Read),
		save:       galera.Causal(st.save, galera.Update),
		extend:     galera.Causal(st.extend, galera.Update),
		unfinished: galera.Causal(st.unfinished, galera.Read),
		delete:     st.delete,
	}}, nil
}

// statements returns the statements for the store's server: on a Galera
// node (asked once) every statement but DeleteFinished's waits first until
// its node has applied what the cluster committed before it. Without that
// wait a node that had not yet applied a claim or record made on another
// node a moment before answered for an older row: the claimant's read
// missed its own claim (ErrInProgress, or ErrNotFound, with the lease
// held until it ended), its next record missed it too (ErrLeaseLost), and
// a Run after a saga finished elsewhere found it still in progress.
func (s *Store) statements(ctx context.Context) (*statements, error) {
	on, err := s.galera.On(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("sagamysql: %w", err)
	}
	if on {
		return &s.gs, nil
	}
	return &s.s, nil
}

// exec runs a write, autocommit: one that the server rolled back as a
// deadlock victim or, on Galera, because a write set of another node that
// touched the row was certified first (1213: a definite failure, nothing
// was written) is run again under retry's default policy, and then finds
// the row as the winner left it.
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	run := func(ctx context.Context) (err error) {
		res, err = mysqlcancel.Exec(ctx, s.db, query, args...)
		return err
	}
	err := run(ctx)
	if err != nil && retry.IsRetryable(err) {
		err = retry.Do(ctx, retry.Policy{}, run)
	}
	return res, err
}

// Claim implements saga.Store: one INSERT … ON DUPLICATE KEY UPDATE, then
// a read of the row, which says whether the claim is ours (no other runner
// can take it before our lease ends).
func (s *Store) Claim(ctx context.Context, fresh *saga.Record, now time.Time) (*saga.Record, bool, error) {
	if fresh == nil {
		return nil, false, fmt.Errorf("%w: sagamysql: nil record", concurkit.ErrInvalidArgument)
	}
	steps, err := encodeSteps(fresh)
	if err != nil {
		return nil, false, err
	}
	st, err := s.statements(ctx)
	if err != nil {
		return nil, false, err
	}
	lease, updated, at := nullTime(fresh.LeaseUntil), timeText(fresh.Updated), timeText(now)
	_, err = s.exec(ctx, st.claim,
		fresh.Key, fresh.Definition, fresh.Version, []byte(fresh.Input), fresh.InputHash, string(fresh.Status), steps, fresh.Error,
		fresh.Claim, lease, timeText(fresh.Created), updated,
		at, fresh.Claim, at, at, updated, at, lease)
	if err != nil {
		return nil, false, fmt.Errorf("sagamysql: claim: %w", err)
	}
	rec, err := s.load(ctx, st, fresh.Key)
	if err != nil {
		return nil, false, err
	}
	return rec, rec.Claim == fresh.Claim, nil
}

// Save implements saga.Store: one UPDATE fenced by rec.Claim.
func (s *Store) Save(ctx context.Context, rec *saga.Record) error {
	if rec == nil {
		return fmt.Errorf("%w: sagamysql: nil record", concurkit.ErrInvalidArgument)
	}
	steps, err := encodeSteps(rec)
	if err != nil {
		return err
	}
	st, err := s.statements(ctx)
	if err != nil {
		return err
	}
	res, err := s.exec(ctx, st.save, string(rec.Status), steps, rec.Error, nullTime(rec.LeaseUntil), timeText(rec.Updated), rec.Key, rec.Claim)
	return fenced("save", res, err)
}

// Extend implements saga.Store: one UPDATE fenced by claim.
func (s *Store) Extend(ctx context.Context, key string, claim int64, until time.Time) error {
	st, err := s.statements(ctx)
	if err != nil {
		return err
	}
	res, err := s.exec(ctx, st.extend, nullTime(until), key, claim)
	return fenced("extend", res, err)
}

func fenced(op string, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("sagamysql: %s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sagamysql: %s: %w", op, err)
	}
	if n == 0 {
		return fmt.Errorf("sagamysql: %s: %w", op, saga.ErrLeaseLost)
	}
	return nil
}

// Load returns the instance key, or an error matching saga.ErrNotFound.
func (s *Store) Load(ctx context.Context, key string) (*saga.Record, error) {
	st, err := s.statements(ctx)
	if err != nil {
		return nil, err
	}
	return s.load(ctx, st, key)
}

func (s *Store) load(ctx context.Context, st *statements, key string) (*saga.Record, error) {
	rec, err := scan(s.db.QueryRowContext(ctx, st.load, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", saga.ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("sagamysql: load: %w", err)
	}
	return rec, nil
}

// Unfinished returns up to limit unfinished instances (Running or
// Compensating) whose lease is free or ended at now, least recently
// updated first: the instances a crashed or cancelled runner left, for a
// recovery job to run again (decode Record.Input into the definition's
// input and call its Run with Record.Key). An instance being run now is
// not listed. limit < 1 is an error matching concurkit.ErrInvalidArgument.
func (s *Store) Unfinished(ctx context.Context, now time.Time, limit int) ([]*saga.Record, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: sagamysql: limit %d < 1", concurkit.ErrInvalidArgument, limit)
	}
	st, err := s.statements(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, st.unfinished, timeText(now), limit)
	if err != nil {
		return nil, fmt.Errorf("sagamysql: unfinished: %w", err)
	}
	defer rows.Close()
	var out []*saga.Record
	for rows.Next() {
		rec, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("sagamysql: unfinished: %w", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sagamysql: unfinished: %w", err)
	}
	return out, nil
}

// DeleteFinished deletes up to limit finished instances (Completed or
// Compensated) last updated before before, oldest first, and returns how
// many it deleted: a reaper calls it in a loop until it returns less than
// limit. A deleted instance's key starts a new saga if it is run again, so
// keep instances longer than clients retry. limit < 1 is an error matching
// concurkit.ErrInvalidArgument.
func (s *Store) DeleteFinished(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit < 1 {
		return 0, fmt.Errorf("%w: sagamysql: limit %d < 1", concurkit.ErrInvalidArgument, limit)
	}
	res, err := s.exec(ctx, s.s.delete, timeText(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sagamysql: delete finished: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sagamysql: delete finished: %w", err)
	}
	return n, nil
}

func scan(row interface{ Scan(...any) error }) (*saga.Record, error) {
	var (
		r                       saga.Record
		status                  string
		steps                   []byte
		lease, created, updated mysqltime.Time
	)
	if err := row.Scan(&r.Key, &r.Definition, &r.Version, &r.Input, &r.InputHash, &status, &steps, &r.Error, &r.Claim, &lease, &created, &updated); err != nil {
		return nil, err
	}
	r.Status = saga.Status(status)
	r.LeaseUntil, r.Created, r.Updated = lease.T, created.T, updated.T
	if err := json.Unmarshal(steps, &r.Steps); err != nil {
		return nil, fmt.Errorf("sagamysql: %s: decoding steps: %w", r.Key, err)
	}
	return &r, nil
}

func encodeSteps(r *saga.Record) ([]byte, error) {
	b, err := json.Marshal(r.Steps)
	if err != nil {
		return nil, fmt.Errorf("sagamysql: %s: encoding steps: %w", r.Key, err)
	}
	return b, nil
}

// timeText is how times are bound: DATETIME(6) text, UTC (mysqltime).
func timeText(t time.Time) string { return mysqltime.Text(t) }

// nullTime maps the zero time (no lease) to NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return timeText(t)
}
