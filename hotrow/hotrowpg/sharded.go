package hotrowpg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
)

// The statements of a shard table. Placeholders: %[1]s table, %[2]s key,
// %[3]s value, %[4]s shard. shardAddSQL checks the new value against $4
// (0 for Take, the bigint minimum for Add) and the bigint maximum in
// numeric arithmetic, so a refusal raises no error.
const (
	shardAddSQL = `UPDATE %[1]s SET %[3]s = %[3]s + $3::bigint
WHERE %[2]s = $1 AND %[4]s = $2
  AND %[3]s::numeric + $3::bigint BETWEEN $4::bigint AND 9223372036854775807`
	shardLockSQL   = `SELECT %[4]s, %[3]s FROM %[1]s WHERE %[2]s = $1 ORDER BY %[4]s FOR UPDATE`
	shardWriteSQL  = `UPDATE %[1]s SET %[3]s = $3 WHERE %[2]s = $1 AND %[4]s = $2`
	shardSumSQL    = `SELECT count(*), COALESCE(sum(%[3]s), 0)::text FROM %[1]s WHERE %[2]s = $1`
	shardInsertSQL = `INSERT INTO %[1]s (%[2]s, %[4]s, %[3]s) VALUES ($1, $2, $3)`
)

const readCommittedSQL = `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`

type shardStmts struct{ add, lock, write, sum, insert, name string }

var shardCache sync.Map // hotrow.Table → shardStmts

func shardStatements(t hotrow.Table) (shardStmts, error) {
	if st, ok := shardCache.Load(t); ok {
		return st.(shardStmts), nil
	}
	table, key, value, shard, err := t.QuoteShard(ident.Postgres)
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

// ShardStore is the hotrow.ShardStore of one shard table on PostgreSQL,
// for a hotrow.Sharded counter: t's key column and shard column (an
// integer) are its primary key, its value column a bigint. Each method is
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

// TryAdd implements hotrow.ShardStore: one autocommit UPDATE. On a
// session whose default is REPEATABLE READ, an UPDATE that waited for a
// concurrent writer of its shard fails with a serialization failure
// (40001): nothing was applied, and TryAdd reports false, which sends the
// update to the locked path (READ COMMITTED). Such sessions make a
// contended counter slower, never wrong.
func (s *ShardStore[K]) TryAdd(ctx context.Context, key K, shard int, delta int64, floored bool) (bool, error) {
	bound := int64(math.MinInt64)
	if floored {
		bound = 0
	}
	tag, err := s.db.Exec(ctx, s.st.add, key, shard, delta, bound)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" && ctx.Err() == nil {
			return false, nil
		}
		return false, outcome(ctx, false, "add to "+s.st.name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Locked implements hotrow.ShardStore: BEGIN; SELECT … ORDER BY shard FOR
// UPDATE; plan; one UPDATE per changed shard, sent together; COMMIT. The
// transaction is READ COMMITTED whatever the session's default: under
// REPEATABLE READ its FOR UPDATE would fail (40001) on every shard a
// concurrent Add changed since the transaction began.
func (s *ShardStore[K]) Locked(ctx context.Context, key K, plan func(v []int64) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return joinCtx(ctx, fmt.Errorf("%s: begin: %w", pkg, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, readCommittedSQL); err != nil {
		return joinCtx(ctx, fmt.Errorf("%s: begin: %w", pkg, err))
	}
	var shards []int
	var v []int64
	rows, _ := tx.Query(ctx, s.st.lock, key)
	var sh int
	var x int64
	if _, err := pgx.ForEachRow(rows, []any{&sh, &x}, func() error {
		shards, v = append(shards, sh), append(v, x)
		return nil
	}); err != nil {
		return joinCtx(ctx, fmt.Errorf("%s: lock %s: %w", pkg, s.st.name, err))
	}
	if len(v) == 0 {
		return hotrow.ErrNotFound
	}
	old := append([]int64(nil), v...)
	if err := plan(v); err != nil {
		return err
	}
	var b pgx.Batch
	for i := range v {
		if v[i] != old[i] {
			b.Queue(s.st.write, key, shards[i], v[i])
		}
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return joinCtx(ctx, fmt.Errorf("%s: write %s: %w", pkg, s.st.name, err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return outcome(ctx, false, "commit", err)
	}
	return nil
}

// Sum implements hotrow.ShardStore: one SELECT count(*), sum(…).
func (s *ShardStore[K]) Sum(ctx context.Context, key K) (int64, int, error) {
	var n int
	var sum string
	if err := s.db.QueryRow(ctx, s.st.sum, key).Scan(&n, &sum); err != nil {
		return 0, 0, joinCtx(ctx, fmt.Errorf("%s: sum %s: %w", pkg, s.st.name, err))
	}
	v, err := strconv.ParseInt(sum, 10, 64)
	if err != nil {
		return 0, n, hotrow.ErrOverflow // numeric sum of bigints: only the range can fail
	}
	return v, n, nil
}

// Insert implements hotrow.ShardStore: one INSERT per shard, sent
// together in one transaction; a unique violation is hotrow.ErrExists.
func (s *ShardStore[K]) Insert(ctx context.Context, key K, v []int64) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return joinCtx(ctx, fmt.Errorf("%s: begin: %w", pkg, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var b pgx.Batch
	for i, x := range v {
		b.Queue(s.st.insert, key, i, x)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return hotrow.ErrExists
		}
		return joinCtx(ctx, fmt.Errorf("%s: insert into %s: %w", pkg, s.st.name, err))
	}
	if err := tx.Commit(ctx); err != nil {
		return outcome(ctx, false, "commit", err)
	}
	return nil
}
