package ratelimitpg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/internal/spec"
)

// DBTX is the part of a pgx v5 pool, connection or transaction that the
// package uses: *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy
// it. It is the same interface as every other concurkit PostgreSQL
// adapter's DBTX.
type DBTX = pgxdb.DBTX

var (
	_ DBTX = (*pgxpool.Pool)(nil)
	_ DBTX = (*pgx.Conn)(nil)
	_ DBTX = pgx.Tx(nil)
)

const pkg = "ratelimitpg"

// The tables of migrations/postgres/toolkit/0005_ratelimit.up.sql.
const (
	// WindowTable holds one fixed-window counter per key: "key" text
	// PRIMARY KEY, "window_end" timestamptz, "used" bigint.
	WindowTable = "concurkit_ratelimit_windows"
	// GCRATable holds one theoretical arrival time per key: "key" text
	// PRIMARY KEY, "tat" timestamptz.
	GCRATable = "concurkit_ratelimit_gcra"
)

// SQL templates; %[1]s is the quoted table name, never a value.
const (
	// windowSQL counts a call into the key's window in one statement. The
	// row is locked by the upsert and both the new count and the guard
	// are computed from the latest committed version (ON CONFLICT DO
	// UPDATE re-reads it under READ COMMITTED), so concurrent callers
	// admit exactly the limit. A newer window than the stored one
	// restarts the count; an older one (a caller whose clock lags) counts
	// into the stored window (GREATEST). A refused call updates nothing
	// and returns no row.
	windowSQL = `INSERT INTO %[1]s AS r ("key", "window_end", "used") VALUES ($1, $2, $3)
ON CONFLICT ("key") DO UPDATE SET
  "window_end" = GREATEST(r."window_end", EXCLUDED."window_end"),
  "used" = CASE WHEN r."window_end" < EXCLUDED."window_end" THEN EXCLUDED."used" ELSE r."used" + EXCLUDED."used" END
WHERE r."window_end" < EXCLUDED."window_end" OR r."used" + EXCLUDED."used" <= $4
RETURNING "used", "window_end"`

	// gcraSQL is GCRA on a row: EXCLUDED.tat is now + n·T ($2 + $3), so
	// GREATEST(tat + n·T, EXCLUDED.tat) is max(tat, now) + n·T; the call
	// passes if that is at most now + τ ($2 + $4). Locking and
	// re-reading as for windowSQL; a refused call returns no row.
	gcraSQL = `INSERT INTO %[1]s AS r ("key", "tat") VALUES ($1, $2::timestamptz + $3::interval)
ON CONFLICT ("key") DO UPDATE SET "tat" = GREATEST(r."tat" + $3::interval, EXCLUDED."tat")
WHERE GREATEST(r."tat" + $3::interval, EXCLUDED."tat") <= $2::timestamptz + $4::interval
RETURNING "tat"`

	// gcraReadSQL reads the TAT after a refusal, for RetryAfter: a second
	// round trip, on refusals only.
	gcraReadSQL = `SELECT "tat" FROM %[1]s WHERE "key" = $1`

	resetSQL = `DELETE FROM %[1]s WHERE "key" = $1`
)

// Config tunes a Limiter. The zero Config (or nil) is GCRA on the
// caller's clock, with the tables found through the connection's
// search_path. New copies it.
type Config struct {
	// Algorithm is ratelimit.GCRA (the zero value) or
	// ratelimit.FixedWindow.
	Algorithm ratelimit.Algorithm
	// Schema holds WindowTable and GCRATable. Empty means the
	// connection's search_path (where migrations.Up created them).
	Schema string
	// Now is the clock. Nil means time.Now. Its reading is a parameter of
	// the statements (they never call now()): see the package doc.
	Now func() time.Time
}

// Limiter is a ratelimit.Limiter on PostgreSQL. It is safe for concurrent
// use (as far as db is) and holds no state of its own: any number of
// Limiters, in any number of processes, share the counts in the tables.
type Limiter struct {
	db    DBTX
	algo  ratelimit.Algorithm
	now   func() time.Time
	table string // quoted, of the algorithm
	// the statements, built once
	allow, read, reset, reap string
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// New returns a Limiter that keeps its counts in db: a pool (the usual
// choice), a connection or a transaction. It does no I/O. It returns an
// error matching concurkit.ErrInvalidArgument for a nil db (also a typed
// nil), an unknown Config.Algorithm or an invalid Config.Schema.
func New(db DBTX, cfg *Config) (*Limiter, error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%w: %s: nil db", concurkit.ErrInvalidArgument, pkg)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := spec.Algorithm(pkg, c.Algorithm); err != nil {
		return nil, err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	name := GCRATable
	if c.Algorithm == ratelimit.FixedWindow {
		name = WindowTable
	}
	parts := []string{name}
	if c.Schema != "" {
		parts = []string{c.Schema, name}
	}
	table, err := ident.Postgres(parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: Config.Schema: %w", concurkit.ErrInvalidArgument, pkg, err)
	}
	l := &Limiter{db: db, algo: c.Algorithm, now: c.Now, table: table,
		reset: fmt.Sprintf(resetSQL, table)}
	if c.Algorithm == ratelimit.FixedWindow {
		l.allow = fmt.Sprintf(windowSQL, table)
		l.reap = fmt.Sprintf(reapSQL, table, `"window_end"`)
	} else {
		l.allow = fmt.Sprintf(gcraSQL, table)
		l.read = fmt.Sprintf(gcraReadSQL, table)
		l.reap = fmt.Sprintf(reapSQL, table, `"tat"`)
	}
	return l, nil
}

func (l *Limiter) check() error {
	if l == nil || l.db == nil {
		return fmt.Errorf("%w: %s: nil or zero Limiter (use New)", concurkit.ErrInvalidArgument, pkg)
	}
	return nil
}

// Allow is AllowN(ctx, key, limit, 1).
func (l *Limiter) Allow(ctx context.Context, key string, limit ratelimit.Limit) (ratelimit.Decision, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN counts a request of cost n against key's limit and reports
// whether it may proceed, in one statement (check and count are atomic; a
// denied request is not counted). A denied GCRA request costs a second,
// read-only round trip for its RetryAfter.
//
// With a transaction as db, the key's row stays locked until the
// transaction ends (other callers of the key wait), and a rollback takes
// the request back: pass a pool unless that is what you want.
//
// It returns an error matching concurkit.ErrInvalidArgument, before any
// I/O, for a nil or zero Limiter, an empty key, a key longer than
// ratelimit.MaxKeyLen, not valid UTF-8 or with a NUL byte, a limit that is
// not valid for the Limiter's algorithm (ratelimit.Limit.Validate), n < 1,
// n more than the limit admits at once, or a clock reading outside
// 1970…2200. Driver errors are wrapped (a missing table is SQLSTATE
// 42P01: run migrations.Up), name the key by ratelimit.KeyID (no error
// contains the key) and match ctx.Err() when ctx ended the call; the
// request may then have been counted.
func (l *Limiter) AllowN(ctx context.Context, key string, limit ratelimit.Limit, n int64) (ratelimit.Decision, error) {
	if err := l.check(); err != nil {
		return ratelimit.Decision{}, err
	}
	c, err := spec.Prepare(pkg, l.algo, key, limit, n, l.now())
	if err != nil {
		return ratelimit.Decision{}, err
	}
	if c.Algo == ratelimit.FixedWindow {
		var used int64
		var end time.Time
		err := l.db.QueryRow(ctx, l.allow, key, time.UnixMicro(c.WindowEnd), c.N, c.Limit.Rate).Scan(&used, &end)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Refused: the stored window is ours (or newer) and full.
			return c.WindowDenied(c.WindowEnd), nil
		case err != nil:
			return ratelimit.Decision{}, spec.StoreError(ctx, pkg, key, err)
		}
		return c.WindowAllowed(used, end.UnixMicro()), nil
	}
	var tat time.Time
	now := time.UnixMicro(c.Now)
	err = l.db.QueryRow(ctx, l.allow, key, now, micros(c.Inc), micros(c.Tau)).Scan(&tat)
	switch {
	case err == nil:
		return c.GCRAAllowed(tat.UnixMicro()), nil
	case !errors.Is(err, pgx.ErrNoRows):
		return ratelimit.Decision{}, spec.StoreError(ctx, pkg, key, err)
	}
	err = l.db.QueryRow(ctx, l.read, key).Scan(&tat)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // reaped since: nothing is owed
		return c.GCRADenied(c.Now), nil
	case err != nil:
		return ratelimit.Decision{}, spec.StoreError(ctx, pkg, key, err)
	}
	return c.GCRADenied(tat.UnixMicro()), nil
}

func micros(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

// Reset forgets key's count under the Limiter's algorithm, so its next
// request starts with the full quota. It returns an error matching
// concurkit.ErrInvalidArgument for a bad key or a nil Limiter, and the
// wrapped driver error otherwise.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := l.check(); err != nil {
		return err
	}
	if err := spec.Key(pkg, key); err != nil {
		return err
	}
	if _, err := l.db.Exec(ctx, l.reset, key); err != nil {
		return spec.StoreError(ctx, pkg, key, err)
	}
	return nil
}
