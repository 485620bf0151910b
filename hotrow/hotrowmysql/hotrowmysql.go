package hotrowmysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/mysqlcancel"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/retry"
)

// DBTX is the database/sql query interface Add needs: *sql.DB, *sql.Conn
// and *sql.Tx satisfy it.
type DBTX = sqldb.DBTX

// DB is what a Store needs: queries and transactions of its own. *sql.DB
// and *sql.Conn satisfy it.
type DB interface {
	sqldb.DBTX
	sqldb.Beginner
}

var (
	_ DB = (*sql.DB)(nil)
	_ DB = (*sql.Conn)(nil)
)

// addSQL adds the first argument to the row of key (second) when the value
// plus the third (the lowest running sum) is at least the fourth (the
// floor, or the BIGINT minimum) and the value plus the fifth (the highest)
// within the BIGINT maximum, checked in DECIMAL arithmetic; the last
// condition is always true and hands the new value back through
// LAST_INSERT_ID(expr), whose value the OK packet carries (evaluated on the
// locked row version the update applies to). Placeholders: %[1]s table,
// %[2]s key, %[3]s value, %[4]s the version increment (hotrow.Table.QuoteVersion).
const addSQL = `UPDATE %[1]s SET %[3]s = %[3]s + ?%[4]s
WHERE %[2]s = ?
  AND CAST(%[3]s AS DECIMAL(21)) + ? >= ?
  AND CAST(%[3]s AS DECIMAL(21)) + ? <= 9223372036854775807
  AND LAST_INSERT_ID(IF(CAST(%[3]s AS DECIMAL(21)) + ? BETWEEN -9223372036854775808 AND 9223372036854775807, %[3]s + ?, 0)) IS NOT NULL`

// readSQL reads the value after a miss (to tell why) or for a zero delta,
// and lockSQL in the locked path; writeSQL writes the locked path's result.
const (
	readSQL  = `SELECT %[3]s FROM %[1]s WHERE %[2]s = ?`
	lockSQL  = `SELECT %[3]s FROM %[1]s WHERE %[2]s = ? FOR UPDATE`
	writeSQL = `UPDATE %[1]s SET %[3]s = ?%[4]s WHERE %[2]s = ?`
	// The Ledger's, in two parts: a batch's keys' placeholders go between
	// them. Not a format string: a quoted name may hold a %.
	lockManySQL = `SELECT %[2]s, %[3]s FROM %[1]s WHERE %[2]s IN (|) ORDER BY %[2]s FOR UPDATE`
)

const pkg = "hotrowmysql"

type stmts struct {
	add, read, lock, write, name string
	lockMany                     []string // parts, see lockManySQL
}

var cache sync.Map // hotrow.Table → stmts

func statements(t hotrow.Table) (stmts, error) {
	if st, ok := cache.Load(t); ok {
		return st.(stmts), nil
	}
	table, key, value, err := t.Quote(ident.MySQL)
	if err != nil {
		return stmts{}, fmt.Errorf("%s: %w", pkg, err)
	}
	bump, err := t.QuoteVersion(ident.MySQL)
	if err != nil {
		return stmts{}, fmt.Errorf("%s: %w", pkg, err)
	}
	st := stmts{
		add:      fmt.Sprintf(addSQL, table, key, value, bump),
		read:     fmt.Sprintf(readSQL, table, key, value),
		lock:     fmt.Sprintf(lockSQL, table, key, value),
		write:    fmt.Sprintf(writeSQL, table, key, value, bump),
		name:     table,
		lockMany: parts(lockManySQL, table, key, value),
	}
	cache.Store(t, st)
	return st, nil
}

// parts splits sql at its | into the parts around which a batch's
// placeholders go, each part formatted with the quoted names.
func parts(sql, table, key, value string) []string {
	p := strings.Split(sql, "|")
	for i := range p {
		if strings.Contains(p[i], "%") {
			p[i] = fmt.Sprintf(p[i], table, key, value)
		}
	}
	return p
}

// Add adds delta to the value of key in t, in one statement, and returns
// the new value: the escrow update. With floor non-nil a negative delta
// that would take the value below *floor is refused (ErrInsufficient); an
// increment never is. It runs on any handle, inside a caller's transaction
// too (a refused update leaves the transaction usable). A zero delta reads
// the value.
//
// On a *sql.DB a statement the server rolled back (a deadlock victim, on
// Galera a certification failure: 1213) is run again; on a *sql.Tx or
// *sql.Conn that error is returned, retryable (retry.IsRetryable).
//
// Errors: hotrow.ErrInsufficient, hotrow.ErrOverflow, hotrow.ErrNotFound
// (nothing applied); before any I/O, an error matching
// concurkit.ErrInvalidArgument for a nil db or an invalid t; a
// *concurkit.AmbiguousCommitError when db is not a transaction and the
// statement's outcome is unknown; otherwise the driver's error, wrapped,
// matching ctx.Err() when ctx ended the call.
func Add(ctx context.Context, db DBTX, t hotrow.Table, key any, delta int64, floor *int64) (int64, error) {
	if handle.IsNil(db) {
		return 0, fmt.Errorf("%s: %w: nil db", pkg, concurkit.ErrInvalidArgument)
	}
	st, err := statements(t)
	if err != nil {
		return 0, err
	}
	if delta == 0 {
		return read(ctx, db, st, key)
	}
	b, _ := hotrow.NewBatch(floor != nil, delta)
	bound := int64(math.MinInt64)
	if b.Checked {
		bound = *floor
	}
	_, alone := db.(*sql.DB)
	v, ok, err := add(ctx, db, alone, st, key, b, bound)
	if err != nil || ok {
		return v, err
	}
	return 0, miss(ctx, db, st, key, delta, b.Checked)
}

// add runs addSQL; bound is the floor when b.Checked, else MinInt64. A
// zero b.Delta changes no row, so it reports ok false. alone: see exec.
func add(ctx context.Context, db DBTX, alone bool, st stmts, key any, b hotrow.Batch, bound int64) (int64, bool, error) {
	res, err := exec(ctx, db, alone, st.add, b.Delta, key, b.Low, bound, b.High, b.Delta, b.Delta)
	if err != nil {
		return 0, false, wrap("add to "+st.name, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n != 1 {
		return 0, false, err
	}
	v, err := res.LastInsertId()
	return v, err == nil, err
}

func read(ctx context.Context, db DBTX, st stmts, key any) (int64, error) {
	var v int64
	if err := db.QueryRowContext(ctx, st.read, key).Scan(&v); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, hotrow.ErrNotFound
		}
		return 0, wrap("read "+st.name, joinCtx(ctx, err))
	}
	return v, nil
}

// miss tells why the update matched no row.
func miss(ctx context.Context, db DBTX, st stmts, key any, delta int64, floored bool) error {
	v, err := read(ctx, db, st, key)
	if err != nil {
		return err
	}
	if s := v + delta; !floored || (delta > 0 && s < v) || (delta < 0 && s > v) {
		return hotrow.ErrOverflow
	}
	return hotrow.ErrInsufficient
}

func wrap(op string, err error) error {
	var amb *concurkit.AmbiguousCommitError
	if errors.As(err, &amb) {
		return &concurkit.AmbiguousCommitError{Err: fmt.Errorf("%s: %s: %w", pkg, op, amb.Err)}
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}

func joinCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}

// Store is the hotrow.Store of one table on MariaDB/MySQL, for a
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

// TryAdd implements hotrow.Store: one autocommit UPDATE, run again while
// the server rolls it back (see exec).
func (s *Store[K]) TryAdd(ctx context.Context, key K, b hotrow.Batch, floor int64) (int64, bool, error) {
	bound := int64(math.MinInt64)
	if b.Checked {
		bound = floor
	}
	return add(ctx, s.db, true, s.st, key, b, bound)
}

// Locked implements hotrow.Store: BEGIN, SELECT … FOR UPDATE, plan, UPDATE
// (when the value changes), COMMIT; run again, plan included, while the
// server rolls it back (see inTx).
func (s *Store[K]) Locked(ctx context.Context, key K, plan func(v int64) int64) error {
	return inTx(ctx, func(ctx context.Context) error { return s.locked(ctx, key, plan) })
}

func (s *Store[K]) locked(ctx context.Context, key K, plan func(v int64) int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return wrap("begin", joinCtx(ctx, err))
	}
	defer func() { _ = tx.Rollback() }()
	var v int64
	if err := tx.QueryRowContext(ctx, s.st.lock, key).Scan(&v); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return hotrow.ErrNotFound
		}
		return wrap("lock "+s.st.name, joinCtx(ctx, err))
	}
	if nv := plan(v); nv != v {
		if _, err := tx.ExecContext(ctx, s.st.write, nv, key); err != nil {
			return wrap("write "+s.st.name, joinCtx(ctx, err))
		}
	}
	return commit(ctx, tx)
}

// exec runs a statement through mysqlcancel.Exec. When it runs alone —
// autocommit: a Store's own statement, or Add's on a *sql.DB — one that
// the server rolled back (see rolledBack) is run again under retry's
// default policy. Otherwise (Add on a *sql.Tx or *sql.Conn) it may belong
// to the caller's transaction, which the 1213 rolled back whole: the error
// is returned, retryable (retry.IsRetryable), for the caller's loop
// (pessimisticmysql.InTx) to run the transaction again.
func exec(ctx context.Context, db DBTX, alone bool, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	run := func(ctx context.Context) (err error) {
		res, err = mysqlcancel.Exec(ctx, db, query, args...)
		return err
	}
	if !alone {
		return res, run(ctx)
	}
	return res, retry.Do(ctx, retry.Policy{Retryable: rolledBack}, run)
}

// inTx runs attempt, one transaction of the store's own from BEGIN to
// COMMIT, again under retry's default policy while the server rolls it
// back (see rolledBack), at any statement or at COMMIT. Nothing of such an
// attempt was applied, so the next one, with the values it reads and its
// plan run on them, applies the work once.
func inTx(ctx context.Context, attempt func(ctx context.Context) error) error {
	return retry.Do(ctx, retry.Policy{Retryable: rolledBack}, attempt)
}

// rolledBack reports whether err is the server's answer that it rolled the
// statement or transaction back, so that nothing of it was written: a
// deadlock victim or, on a Galera cluster, a write set of another node
// certified first or applied over this transaction's locks (1213), or
// MariaDB's 1020. Never an outcome-unknown commit or the end of ctx.
func rolledBack(err error) bool {
	return mysqlerr.Retryable(err) && !errors.Is(err, concurkit.ErrOutcomeUnknown) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// commit commits tx; an error the server did not answer, on a connection
// that sent the COMMIT, is a *concurkit.AmbiguousCommitError.
func commit(ctx context.Context, tx *sql.Tx) error {
	err := tx.Commit()
	if err == nil {
		return nil
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) || errors.Is(err, sql.ErrTxDone) || errors.Is(err, driver.ErrBadConn) {
		return wrap("commit", joinCtx(ctx, err)) // answered, or never sent
	}
	return &concurkit.AmbiguousCommitError{Err: wrap("commit", joinCtx(ctx, err))}
}
