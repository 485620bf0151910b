package sagapg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/saga"
)

// DBTX is the part of a pgx v5 pool or connection that the store uses:
// *pgxpool.Pool (recommended), *pgxpool.Conn and *pgx.Conn satisfy it. It is
// the same interface as every other concurkit PostgreSQL adapter's DBTX.
type DBTX = pgxdb.DBTX

var (
	_ DBTX       = (*pgxpool.Pool)(nil)
	_ DBTX       = (*pgx.Conn)(nil)
	_ saga.Store = (*Store)(nil)
)

// Config configures a Store. A nil *Config means the defaults.
type Config struct {
	// Table is the instances table. The zero Table is saga.DefaultTable,
	// concurkit_sagas, in the connection's search_path.
	Table saga.Table
}

// Store is a saga.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	db                                            DBTX
	claim, load, save, extend, unfinished, delete string
}

// SQL templates; %[1]s is the quoted table, never a value. The status
// literals are saga.Running and saga.Compensating (unfinished) and
// saga.Completed and saga.Compensated (finished).
const (
	columns = `saga_key, definition, definition_version, input, input_hash, status, steps, last_error, claim, lease_until, created_at, updated_at`
	// pgClaim inserts the instance or, if it exists unfinished with its
	// lease free or ended at $13, takes the lease; RETURNING yields the
	// row only when one of the two happened (the claim is ours).
	pgClaim = `INSERT INTO %[1]s AS s (` + columns + `, revision)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 1)
ON CONFLICT (saga_key) DO UPDATE SET claim = EXCLUDED.claim, lease_until = EXCLUDED.lease_until,
	updated_at = EXCLUDED.updated_at, revision = s.revision + 1
WHERE s.status IN ('running', 'compensating') AND (s.lease_until IS NULL OR s.lease_until <= $13)
RETURNING ` + columns
	pgLoad = `SELECT ` + columns + ` FROM %[1]s WHERE saga_key = $1`
	// pgSave and pgExtend are fenced by the claim: a runner whose lease
	// was taken over matches no row.
	pgSave = `UPDATE %[1]s SET status = $3, steps = $4, last_error = $5, lease_until = $6, updated_at = $7, revision = revision + 1
WHERE saga_key = $1 AND claim = $2`
	pgExtend     = `UPDATE %[1]s SET lease_until = $3, revision = revision + 1 WHERE saga_key = $1 AND claim = $2`
	pgUnfinished = `SELECT ` + columns + ` FROM %[1]s
WHERE status IN ('running', 'compensating') AND (lease_until IS NULL OR lease_until <= $1)
ORDER BY updated_at, saga_key LIMIT $2`
	pgDelete = `DELETE FROM %[1]s WHERE saga_key IN (
	SELECT saga_key FROM %[1]s WHERE status IN ('completed', 'compensated') AND updated_at < $1 LIMIT $2)`
)

// New returns a Store on db. It returns an error matching
// concurkit.ErrInvalidArgument for a nil db or an invalid table name.
// It does not check that the table exists: apply the toolkit migrations
// (migrations.Up) first.
func New(db DBTX, cfg *Config) (*Store, error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%w: sagapg: nil db", concurkit.ErrInvalidArgument)
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
	table, err := ident.Postgres(parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: sagapg: table: %w", concurkit.ErrInvalidArgument, err)
	}
	f := func(q string) string { return fmt.Sprintf(q, table) }
	return &Store{db: db, claim: f(pgClaim), load: f(pgLoad), save: f(pgSave), extend: f(pgExtend),
		unfinished: f(pgUnfinished), delete: f(pgDelete)}, nil
}

// Claim implements saga.Store in one statement, plus a read of the row
// when the claim did not happen.
func (s *Store) Claim(ctx context.Context, fresh *saga.Record, now time.Time) (*saga.Record, bool, error) {
	if fresh == nil {
		return nil, false, fmt.Errorf("%w: sagapg: nil record", concurkit.ErrInvalidArgument)
	}
	steps, err := encodeSteps(fresh)
	if err != nil {
		return nil, false, err
	}
	// A row deleted between the two statements (DeleteFinished) makes the
	// read miss; the next INSERT then succeeds.
	for range 3 {
		rec, err := scan(s.db.QueryRow(ctx, s.claim, fresh.Key, fresh.Definition, fresh.Version, []byte(fresh.Input), fresh.InputHash,
			string(fresh.Status), steps, fresh.Error, fresh.Claim, nullTime(fresh.LeaseUntil), fresh.Created, fresh.Updated, now))
		if err == nil {
			return rec, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("sagapg: claim: %w", err)
		}
		rec, err = s.Load(ctx, fresh.Key)
		if err == nil {
			return rec, false, nil
		}
		if !errors.Is(err, saga.ErrNotFound) {
			return nil, false, err
		}
	}
	return nil, false, fmt.Errorf("sagapg: claim %s: the row keeps disappearing", fresh.Key)
}

// Save implements saga.Store: one UPDATE fenced by rec.Claim.
func (s *Store) Save(ctx context.Context, rec *saga.Record) error {
	if rec == nil {
		return fmt.Errorf("%w: sagapg: nil record", concurkit.ErrInvalidArgument)
	}
	steps, err := encodeSteps(rec)
	if err != nil {
		return err
	}
	tag, err := s.db.Exec(ctx, s.save, rec.Key, rec.Claim, string(rec.Status), steps, rec.Error, nullTime(rec.LeaseUntil), rec.Updated)
	if err != nil {
		return fmt.Errorf("sagapg: save: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("sagapg: save: %w", saga.ErrLeaseLost)
	}
	return nil
}

// Extend implements saga.Store: one UPDATE fenced by claim.
func (s *Store) Extend(ctx context.Context, key string, claim int64, until time.Time) error {
	tag, err := s.db.Exec(ctx, s.extend, key, claim, nullTime(until))
	if err != nil {
		return fmt.Errorf("sagapg: extend: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("sagapg: extend: %w", saga.ErrLeaseLost)
	}
	return nil
}

// Load returns the instance key, or an error matching saga.ErrNotFound.
func (s *Store) Load(ctx context.Context, key string) (*saga.Record, error) {
	rec, err := scan(s.db.QueryRow(ctx, s.load, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", saga.ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("sagapg: load: %w", err)
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
		return nil, fmt.Errorf("%w: sagapg: limit %d < 1", concurkit.ErrInvalidArgument, limit)
	}
	rows, err := s.db.Query(ctx, s.unfinished, now, limit)
	if err != nil {
		return nil, fmt.Errorf("sagapg: unfinished: %w", err)
	}
	defer rows.Close()
	var out []*saga.Record
	for rows.Next() {
		rec, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("sagapg: unfinished: %w", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sagapg: unfinished: %w", err)
	}
	return out, nil
}

// DeleteFinished deletes up to limit finished instances (Completed or
// Compensated) last updated before before, and returns how many it
// deleted: a reaper calls it in a loop until it returns less than limit.
// A deleted instance's key starts a new saga if it is run again, so keep
// instances longer than clients retry. limit < 1 is an error matching
// concurkit.ErrInvalidArgument.
func (s *Store) DeleteFinished(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit < 1 {
		return 0, fmt.Errorf("%w: sagapg: limit %d < 1", concurkit.ErrInvalidArgument, limit)
	}
	tag, err := s.db.Exec(ctx, s.delete, before, limit)
	if err != nil {
		return 0, fmt.Errorf("sagapg: delete finished: %w", err)
	}
	return tag.RowsAffected(), nil
}

func scan(row pgx.Row) (*saga.Record, error) {
	var (
		r      saga.Record
		status string
		steps  []byte
		lease  *time.Time
	)
	if err := row.Scan(&r.Key, &r.Definition, &r.Version, &r.Input, &r.InputHash, &status, &steps, &r.Error, &r.Claim, &lease, &r.Created, &r.Updated); err != nil {
		return nil, err
	}
	r.Status = saga.Status(status)
	if lease != nil {
		r.LeaseUntil = *lease
	}
	if err := decodeSteps(&r, steps); err != nil {
		return nil, err
	}
	return &r, nil
}

func encodeSteps(r *saga.Record) ([]byte, error) {
	b, err := json.Marshal(r.Steps)
	if err != nil {
		return nil, fmt.Errorf("sagapg: %s: encoding steps: %w", r.Key, err)
	}
	return b, nil
}

func decodeSteps(r *saga.Record, b []byte) error {
	if err := json.Unmarshal(b, &r.Steps); err != nil {
		return fmt.Errorf("sagapg: %s: decoding steps: %w", r.Key, err)
	}
	return nil
}

// nullTime maps the zero time (no lease) to NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
