package hotrowpg

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/internal/handle"
)

// lockManySQL locks the rows of the keys in $1 (an array) in key order:
// PostgreSQL sorts before it locks, so every batch locks in one order and
// two batches cannot deadlock.
const lockManySQL = `SELECT %[2]s, %[3]s FROM %[1]s WHERE %[2]s = ANY($1) ORDER BY %[2]s FOR UPDATE`

// LedgerStore is the hotrow.LedgerStore of one table on PostgreSQL, for a
// hotrow.Ledger: each batch is one transaction on the DB it was made with.
type LedgerStore[K cmp.Ordered] struct {
	db DB
	st stmts
}

var _ hotrow.LedgerStore[int64] = (*LedgerStore[int64])(nil)

// NewLedgerStore returns the LedgerStore of t on db (t's key column holds
// the accounts, its value column their balances). It returns an error
// matching concurkit.ErrInvalidArgument for a nil db or an invalid t.
func NewLedgerStore[K cmp.Ordered](db DB, t hotrow.Table) (*LedgerStore[K], error) {
	if handle.IsNil(db) {
		return nil, fmt.Errorf("%s: %w: nil db", pkg, concurkit.ErrInvalidArgument)
	}
	st, err := statements(t)
	if err != nil {
		return nil, err
	}
	return &LedgerStore[K]{db: db, st: st}, nil
}

// Apply implements hotrow.LedgerStore: BEGIN; SELECT … WHERE key =
// ANY($1) ORDER BY key FOR UPDATE; plan; one UPDATE per changed row, sent
// together in one round trip; COMMIT.
func (s *LedgerStore[K]) Apply(ctx context.Context, keys []K, plan func(v []int64, found []bool)) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return joinCtx(ctx, fmt.Errorf("%s: begin: %w", pkg, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	v := make([]int64, len(keys))
	found := make([]bool, len(keys))
	rows, _ := tx.Query(ctx, s.st.lockMany, keys)
	var k K
	var bal int64
	_, err = pgx.ForEachRow(rows, []any{&k, &bal}, func() error {
		if i, ok := slices.BinarySearch(keys, k); ok {
			v[i], found[i] = bal, true
		}
		return nil
	})
	if err != nil {
		return joinCtx(ctx, fmt.Errorf("%s: lock %s: %w", pkg, s.st.name, err))
	}
	old := slices.Clone(v)
	plan(v, found)
	var b pgx.Batch
	for i := range keys {
		if found[i] && v[i] != old[i] {
			b.Queue(s.st.write, keys[i], v[i])
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
