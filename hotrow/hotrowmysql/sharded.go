package hotrowmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
)

// The statements of a shard table. Placeholders: %[1]s table, %[2]s key,
// %[3]s value, %[4]s shard. shardAddSQL checks the new value against the
// bound (0 for Take, the BIGINT minimum for Add) and the BIGINT maximum in
// DECIMAL arithmetic, so a refusal raises no error. shardInsertSQL is the
// head of a multi-row INSERT; the rows' placeholders follow it.
const (
	shardAddSQL = `UPDATE %[1]s SET %[3]s = %[3]s + ?
WHERE %[2]s = ? AND %[4]s = ?
  AND CAST(%[3]s AS DECIMAL(21)) + ? BETWEEN ? AND 9223372036854775807`
	shardLockSQL   = `SELECT %[4]s, %[3]s FROM %[1]s WHERE %[2]s = ? ORDER BY %[4]s FOR UPDATE`
	shardWriteSQL  = `UPDATE %[1]s SET %[3]s = ? WHERE %[2]s = ? AND %[4]s = ?`
	shardSumSQL    = `SELECT COUNT(*), CAST(COALESCE(SUM(%[3]s), 0) AS CHAR) FROM %[1]s WHERE %[2]s = ?`
	shardInsertSQL = `INSERT INTO %[1]s (%[2]s, %[4]s, %[3]s) VALUES `
)

// errDuplicate is MySQL's ER_DUP_ENTRY.
const errDuplicate = 1062

type shardStmts struct{ add, lock, write, sum, insert, name string }

var shardCache sync.Map // hotrow.Table → shardStmts

func shardStatements(t hotrow.Table) (shardStmts, error) {
	if st, ok := shardCache.Load(t); ok {
		return st.(shardStmts), nil
	}
	table, key, value, shard, err := t.QuoteShard(ident.MySQL)
	if err != nil {
		return shardStmts{}, fmt.Errorf("%s: %w", pkg, err)
	}
	f := func(sql string) string { return fmt.Sprintf(sql, table, key, value, shard) }
	st := shardStmts{
		add: f(shardAddSQL), lock: f(shardLockSQL), write: f(shardWriteSQL),
		sum: f(shardSumSQL), insert: f(shardInsertSQL), name: table,
	}
	shardCache.Store(t, st)
	return st, nil
}

// ShardStore is the hotrow.ShardStore of one shard table on MariaDB/MySQL,
// for a hotrow.Sharded counter: t's key column and shard column (an
// integer) are its primary key, its value column a BIGINT. Each method is
// one transaction on the DB it was made with.
type ShardStore[K comparable] struct {
	db DB
	st shardStmts
}

var _ hotrow.ShardStore[int64] = (*ShardStore[int64])(nil)

// NewShardStore returns the ShardStore of the shard table t on db. It
// returns an error matching concurkit.ErrInvalidArgument for a nil db or
// an invalid t.
func NewShardStore[K comparable](db DB, t hotrow.Table) (*ShardStore[K], error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%s: %w: nil db", pkg, concurkit.ErrInvalidArgument)
	}
	st, err := shardStatements(t)
	if err != nil {
		return nil, err
	}
	return &ShardStore[K]{db: db, st: st}, nil
}

// TryAdd implements hotrow.ShardStore: one autocommit UPDATE, run again
// while the server rolls it back (see exec). A zero delta changes no row
// and reports false.
func (s *ShardStore[K]) TryAdd(ctx context.Context, key K, shard int, delta int64, floored bool) (bool, error) {
	bound := int64(math.MinInt64)
	if floored {
		bound = 0
	}
	res, err := exec(ctx, s.db, true, s.st.add, delta, key, shard, delta, bound)
	if err != nil {
		return false, wrap("add to "+s.st.name, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Locked implements hotrow.ShardStore: BEGIN; SELECT … ORDER BY shard FOR
// UPDATE; plan; one UPDATE per changed shard; COMMIT. The transaction is
// READ COMMITTED whatever the session's default: its locking read must see
// the shards' latest values, which REPEATABLE READ with
// innodb_snapshot_isolation would refuse (1020) after a concurrent Add.
// A transaction the server rolled back is run again, plan included (see
// inTx).
func (s *ShardStore[K]) Locked(ctx context.Context, key K, plan func(v []int64) error) error {
	return inTx(ctx, func(ctx context.Context) error { return s.locked(ctx, key, plan) })
}

func (s *ShardStore[K]) locked(ctx context.Context, key K, plan func(v []int64) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return wrap("begin", joinCtx(ctx, err))
	}
	defer func() { _ = tx.Rollback() }()
	shards, v, err := s.lock(ctx, tx, key)
	if err != nil {
		return wrap("lock "+s.st.name, joinCtx(ctx, err))
	}
	if len(v) == 0 {
		return hotrow.ErrNotFound
	}
	old := append([]int64(nil), v...)
	if err := plan(v); err != nil {
		return err
	}
	for i := range v {
		if v[i] != old[i] {
			if _, err := tx.ExecContext(ctx, s.st.write, v[i], key, shards[i]); err != nil {
				return wrap("write "+s.st.name, joinCtx(ctx, err))
			}
		}
	}
	return commit(ctx, tx)
}

// lock reads key's shard rows FOR UPDATE, in shard order.
func (s *ShardStore[K]) lock(ctx context.Context, tx *sql.Tx, key K) (shards []int, v []int64, err error) {
	rows, err := tx.QueryContext(ctx, s.st.lock, key)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var sh int
		var x int64
		if err := rows.Scan(&sh, &x); err != nil {
			return nil, nil, err
		}
		shards, v = append(shards, sh), append(v, x)
	}
	return shards, v, rows.Err()
}

// Sum implements hotrow.ShardStore: one SELECT COUNT(*), SUM(…).
func (s *ShardStore[K]) Sum(ctx context.Context, key K) (int64, int, error) {
	var n int
	var sum string
	if err := s.db.QueryRowContext(ctx, s.st.sum, key).Scan(&n, &sum); err != nil {
		return 0, 0, wrap("sum "+s.st.name, joinCtx(ctx, err))
	}
	v, err := strconv.ParseInt(sum, 10, 64)
	if err != nil {
		return 0, n, hotrow.ErrOverflow // DECIMAL sum of BIGINTs: only the range can fail
	}
	return v, n, nil
}

// Insert implements hotrow.ShardStore: one multi-row INSERT (atomic on
// its own, run again while the server rolls it back: see exec); a
// duplicate key is hotrow.ErrExists.
func (s *ShardStore[K]) Insert(ctx context.Context, key K, v []int64) error {
	args := make([]any, 0, 3*len(v))
	for i, x := range v {
		args = append(args, key, i, x)
	}
	q := s.st.insert + strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(v)), ", ")
	if _, err := exec(ctx, s.db, true, q, args...); err != nil {
		var myErr *mysql.MySQLError
		if errors.As(err, &myErr) && myErr.Number == errDuplicate {
			return hotrow.ErrExists
		}
		return wrap("insert into "+s.st.name, err)
	}
	return nil
}
