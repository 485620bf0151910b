package hotrowpg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/pgxdb"
)

// DBTX is the pgx v5 query interface Add needs: *pgxpool.Pool,
// *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy it.
type DBTX = pgxdb.DBTX

// DB is what a Store needs: queries and transactions of its own.
// *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn satisfy it.
type DB interface {
	pgxdb.DBTX
	pgxdb.Beginner
}

var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = (*pgx.Conn)(nil)
)

// addSQL adds $2 to the row of key $1 when the value plus $3 (the lowest
// running sum) stays at or above $4 (the floor, or the bigint minimum) and
// the value plus $5 (the highest) within the bigint maximum; the checks
// run in numeric arithmetic, so a refused update raises no error (22003)
// that would abort a caller's transaction. Placeholders: %[1]s table,
// %[2]s key, %[3]s value, %[4]s the version increment (hotrow.Table.QuoteVersion).
const addSQL = `UPDATE %[1]s SET %[3]s = %[3]s + $2::bigint%[4]s
WHERE %[2]s = $1 AND %[3]s::numeric + $3::bigint >= $4::bigint
  AND %[3]s::numeric + $5::bigint <= 9223372036854775807
RETURNING %[3]s`

// readSQL reads the value after a miss (to tell why), and lockSQL in the
// locked path; writeSQL writes the locked path's result.
const (
	readSQL  = `SELECT %[3]s FROM %[1]s WHERE %[2]s = $1`
	lockSQL  = `SELECT %[3]s FROM %[1]s WHERE %[2]s = $1 FOR UPDATE`
	writeSQL = `UPDATE %[1]s SET %[3]s = $2%[4]s WHERE %[2]s = $1`
)

const pkg = "hotrowpg"

type stmts struct{ add, read, lock, lockMany, write, name string }

var cache sync.Map // hotrow.Table → stmts

func statements(t hotrow.Table) (stmts, error) {
	if st, ok := cache.Load(t); ok {
		return st.(stmts), nil
	}
	table, key, value, err := t.Quote(ident.Postgres)
	if err != nil {
		return stmts{}, fmt.Errorf("%s: %w", pkg, err)
	}
	bump, err := t.QuoteVersion(ident.Postgres)
	if err != nil {
		return stmts{}, fmt.Errorf("%s: %w", pkg, err)
	}
	st := stmts{
		add:      fmt.Sprintf(addSQL, table, key, value, bump),
		read:     fmt.Sprintf(readSQL, table, key, value),
		lock:     fmt.Sprintf(lockSQL, table, key, value),
		lockMany: fmt.Sprintf(lockManySQL, table, key, value),
		write:    fmt.Sprintf(writeSQL, table, key, value, bump),
		name:     table,
	}
	cache.Store(t, st)
	return st, nil
}

// Add adds delta to the value of key in t, in one statement, and returns
// the new value: the escrow update. With floor non-nil a negative delta
// that would take the value below *floor is refused (ErrInsufficient); an
// increment never is. It runs on any handle, inside a caller's transaction
// too (a refused update leaves the transaction usable).
//
// Errors: hotrow.ErrInsufficient, hotrow.ErrOverflow, hotrow.ErrNotFound
// (nothing applied); before any I/O, an error matching
// concurkit.ErrInvalidArgument for a nil db or an invalid t; a
// *concurkit.AmbiguousCommitError when db is not a transaction and the
// statement's outcome is unknown (the connection broke, ctx ended it);
// otherwise the driver's error, wrapped.
func Add(ctx context.Context, db DBTX, t hotrow.Table, key any, delta int64, floor *int64) (int64, error) {
	if handle.IsNil(db) {
		return 0, fmt.Errorf("%s: %w: nil db", pkg, concurkit.ErrInvalidArgument)
	}
	st, err := statements(t)
	if err != nil {
		return 0, err
	}
	b, _ := hotrow.NewBatch(floor != nil, delta)
	bound := int64(math.MinInt64)
	if floor != nil && delta < 0 {
		bound = max(*floor, bound)
	}
	v, ok, err := add(ctx, db, st, key, b, bound)
	if err != nil || ok {
		return v, err
	}
	return 0, miss(ctx, db, st, key, delta, floor != nil)
}

// add runs addSQL; bound is the floor when b.Checked, else MinInt64.
func add(ctx context.Context, db DBTX, st stmts, key any, b hotrow.Batch, bound int64) (int64, bool, error) {
	var v int64
	err := db.QueryRow(ctx, st.add, key, b.Delta, b.Low, bound, b.High).Scan(&v)
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	}
	_, inTx := db.(pgx.Tx)
	return 0, false, outcome(ctx, inTx, "add to "+st.name, err)
}

// miss tells why the update matched no row.
func miss(ctx context.Context, db DBTX, st stmts, key any, delta int64, floored bool) error {
	var v int64
	if err := db.QueryRow(ctx, st.read, key).Scan(&v); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return hotrow.ErrNotFound
		}
		return joinCtx(ctx, fmt.Errorf("%s: read %s after a miss: %w", pkg, st.name, err))
	}
	if s := v + delta; !floored || (delta > 0 && s < v) || (delta < 0 && s > v) {
		return hotrow.ErrOverflow
	}
	return hotrow.ErrInsufficient
}

// outcome wraps a statement's error, as a *concurkit.AmbiguousCommitError
// when the statement ran on its own (autocommit) and may have committed:
// the server did not answer with an error and pgx cannot say it was never
// sent.
func outcome(ctx context.Context, inTx bool, op string, err error) error {
	err = joinCtx(ctx, fmt.Errorf("%s: %s: %w", pkg, op, err))
	var pgErr *pgconn.PgError
	if inTx || errors.As(err, &pgErr) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return err
	}
	return &concurkit.AmbiguousCommitError{Err: err}
}

func joinCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}

// Store is the hotrow.Store of one table on PostgreSQL, for a
// hotrow.Combiner. Its methods run on the DB it was made with, each in a
// transaction of its own.
type Store[K comparable] struct {
	db DB
	st stmts
}

var _ hotrow.Store[int64] = (*Store[int64])(nil)

// NewStore returns the Store of t on db. It returns an error matching
// concurkit.ErrInvalidArgument for a nil db or an invalid t.
func NewStore[K comparable](db DB, t hotrow.Table) (*Store[K], error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%s: %w: nil db", pkg, concurkit.ErrInvalidArgument)
	}
	st, err := statements(t)
	if err != nil {
		return nil, err
	}
	return &Store[K]{db: db, st: st}, nil
}

// TryAdd implements hotrow.Store: one autocommit UPDATE … RETURNING.
func (s *Store[K]) TryAdd(ctx context.Context, key K, b hotrow.Batch, floor int64) (int64, bool, error) {
	bound := int64(math.MinInt64)
	if b.Checked {
		bound = floor
	}
	return add(ctx, s.db, s.st, key, b, bound)
}

// Locked implements hotrow.Store: BEGIN, SELECT … FOR UPDATE, plan, UPDATE
// (when the value changes), COMMIT.
func (s *Store[K]) Locked(ctx context.Context, key K, plan func(v int64) int64) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return joinCtx(ctx, fmt.Errorf("%s: begin: %w", pkg, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var v int64
	if err := tx.QueryRow(ctx, s.st.lock, key).Scan(&v); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return hotrow.ErrNotFound
		}
		return joinCtx(ctx, fmt.Errorf("%s: lock %s: %w", pkg, s.st.name, err))
	}
	if nv := plan(v); nv != v {
		if _, err := tx.Exec(ctx, s.st.write, key, nv); err != nil {
			return joinCtx(ctx, fmt.Errorf("%s: write %s: %w", pkg, s.st.name, err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return outcome(ctx, false, "commit", err)
	}
	return nil
}
