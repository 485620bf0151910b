package hotrowmysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/internal/handle"
)

// LedgerStore is the hotrow.LedgerStore of one table on MariaDB/MySQL, for
// a hotrow.Ledger: each batch is one transaction on the DB it was made
// with. String keys compare under the key column's collation; give it a
// binary one when keys differing only in case are different accounts.
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

// Apply implements hotrow.LedgerStore: BEGIN; SELECT … WHERE key IN (…)
// ORDER BY key FOR UPDATE (InnoDB locks the rows in index order as it
// reads them, so two batches cannot deadlock); plan; one UPDATE per changed
// row; COMMIT. A batch the server rolled back — on Galera, one that lost
// certification to another node's write — is run again, plan included
// (see inTx).
func (s *LedgerStore[K]) Apply(ctx context.Context, keys []K, plan func(v []int64, found []bool)) error {
	if len(keys) == 0 {
		plan(nil, nil)
		return nil
	}
	return inTx(ctx, func(ctx context.Context) error { return s.apply(ctx, keys, plan) })
}

func (s *LedgerStore[K]) apply(ctx context.Context, keys []K, plan func(v []int64, found []bool)) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return wrap("begin", joinCtx(ctx, err))
	}
	defer func() { _ = tx.Rollback() }()
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	v := make([]int64, len(keys))
	found := make([]bool, len(keys))
	if err := s.lock(ctx, tx, args, v, found, keys); err != nil {
		return wrap("lock "+s.st.name, joinCtx(ctx, err))
	}
	old := slices.Clone(v)
	plan(v, found)
	// One UPDATE per changed row, by its key: a point write locks just
	// that row. One UPDATE … CASE … WHERE key IN (…) for all would be one
	// round trip, but on a small table InnoDB scans it and locks rows of
	// other batches (deadlock 1213 under two Ledgers, seen in
	// TestTransfersExact).
	for i := range keys {
		if found[i] && v[i] != old[i] {
			if _, err := tx.ExecContext(ctx, s.st.write, v[i], keys[i]); err != nil {
				return wrap("write "+s.st.name, joinCtx(ctx, err))
			}
		}
	}
	return commit(ctx, tx)
}

// lock reads the rows of keys FOR UPDATE into v and found.
func (s *LedgerStore[K]) lock(ctx context.Context, tx *sql.Tx, args []any, v []int64, found []bool, keys []K) error {
	l := s.st.lockMany
	rows, err := tx.QueryContext(ctx, l[0]+placeholders(len(args))+l[1], args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k K
		var bal int64
		if err := rows.Scan(&k, &bal); err != nil {
			return err
		}
		if i, ok := slices.BinarySearch(keys, k); ok {
			v[i], found[i] = bal, true
		}
	}
	return rows.Err()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
