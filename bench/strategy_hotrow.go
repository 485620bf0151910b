package bench

// The hot-row strategies measure package hotrow: escrow (one conditional
// UPDATE per row change), combine (a hotrow.Combiner per cell: one
// statement and one commit per batch of concurrent changes) and
// transfer-batch (a hotrow.Ledger per cell: one transaction per batch of
// transfers) and sharded (a hotrow.Sharded counter: each row split over
// shard rows that the cell creates and folds back into the row when it
// ends). They update the value column v only: the inventory
// workload's units-sold column w is not kept, and the correctness check
// does not compare it (StrategyInfo.ValueOnly).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowmysql"
	"github.com/concurkit/concurkit/hotrow/hotrowpg"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// hotrowTable is the hotrow.Table of a workload table (key id, value v).
func hotrowTable(table string) hotrow.Table { return hotrow.Table{Name: table} }

// hotrowFloor is the floor of a workload table's values: stock and
// balances never go below zero, counters have none.
func hotrowFloor(table string) *int64 {
	if table == tableCounters {
		return nil
	}
	return hotrow.AtLeast(0)
}

// hotrowResult maps hotrow's refusal to the workload's.
func hotrowResult(err error) (result, error) {
	if errors.Is(err, hotrow.ErrInsufficient) {
		return resRejected, nil
	}
	return rejected(err)
}

// closingExecutor is an executor holding a Combiner or Ledger, closed
// when its cell ends.
type closingExecutor struct {
	executor
	close func(ctx context.Context) error
}

// closeExecutor closes what a cell's executor holds, if anything.
func closeExecutor(ctx context.Context, e executor) {
	if c, ok := e.(closingExecutor); ok {
		_ = c.close(ctx)
	}
}

// escrow applies each change with one conditional UPDATE (hotrowpg.Add);
// the two changes of a transfer run in one transaction.
func pgEscrow(t *pgTarget) (executor, error) {
	tbl := hotrowTable(t.table)
	add := func(ctx context.Context, db hotrowpg.DBTX, c change) error {
		var floor *int64
		if c.floor {
			floor = hotrow.AtLeast(0)
		}
		_, err := hotrowpg.Add(ctx, db, tbl, c.key, c.dv, floor)
		return err
	}
	return pgStrategy(t, func(rec *recorder) opFunc {
		opts := &pessimistic.Options{Retry: observedPolicy(rec)}
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) == 1 {
				return hotrowResult(add(ctx, t.pool, o.changes[0]))
			}
			return hotrowResult(pessimisticpg.InTx(ctx, t.pool, opts, func(ctx context.Context, tx pgx.Tx) error {
				for _, c := range o.changes {
					if err := add(ctx, tx, c); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	}), nil
}

func myEscrow(t *myTarget) (executor, error) {
	tbl := hotrowTable(t.table)
	add := func(ctx context.Context, db hotrowmysql.DBTX, c change) error {
		var floor *int64
		if c.floor {
			floor = hotrow.AtLeast(0)
		}
		_, err := hotrowmysql.Add(ctx, db, tbl, c.key, c.dv, floor)
		return err
	}
	return myStrategy(t, func(rec *recorder) opFunc {
		pol := observedPolicy(rec)
		opts := &pessimistic.Options{Retry: pol}
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) == 1 {
				// Retried only where the statement can fail as a whole:
				// a Galera certification failure (see retryable).
				return hotrowResult(retry.Do(ctx, pol, func(ctx context.Context) error { return add(ctx, t.db, o.changes[0]) }))
			}
			return hotrowResult(pessimisticmysql.InTx(ctx, t.db, opts, func(ctx context.Context, tx *sql.Tx) error {
				for _, c := range o.changes {
					if err := add(ctx, tx, c); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	}), nil
}

// combined runs every single-row change through one Combiner shared by
// the cell's workers.
func combined(store hotrow.Store[int64], table string, wrap func(func(*recorder) opFunc) executor) (executor, error) {
	c, err := hotrow.NewCombiner(store, &hotrow.Options{Floor: hotrowFloor(table)})
	if err != nil {
		return nil, err
	}
	return closingExecutor{executor: wrap(func(*recorder) opFunc {
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) != 1 {
				return resDone, errors.New("bench: combine applies one row change per operation")
			}
			_, err := c.Add(ctx, o.changes[0].key, o.changes[0].dv)
			return hotrowResult(err)
		}
	}), close: c.Close}, nil
}

func pgCombine(t *pgTarget) (executor, error) {
	st, err := hotrowpg.NewStore[int64](t.pool, hotrowTable(t.table))
	if err != nil {
		return nil, err
	}
	return combined(st, t.table, func(w func(*recorder) opFunc) executor { return pgStrategy(t, w) })
}

func myCombine(t *myTarget) (executor, error) {
	st, err := hotrowmysql.NewStore[int64](t.db, hotrowTable(t.table))
	if err != nil {
		return nil, err
	}
	return combined(st, t.table, func(w func(*recorder) opFunc) executor { return myStrategy(t, w) })
}

// ledger runs every transfer through one Ledger shared by the cell's
// workers.
func ledger(store hotrow.LedgerStore[int64], wrap func(func(*recorder) opFunc) executor) (executor, error) {
	l, err := hotrow.NewLedger(store, nil)
	if err != nil {
		return nil, err
	}
	return closingExecutor{executor: wrap(func(*recorder) opFunc {
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) != 2 || o.changes[0].dv >= 0 || o.changes[0].dv != -o.changes[1].dv {
				return resDone, errors.New("bench: transfer-batch applies transfers")
			}
			_, err := l.Transfer(ctx, hotrow.Transfer[int64]{From: o.changes[0].key, To: o.changes[1].key, Amount: o.changes[1].dv})
			return hotrowResult(err)
		}
	}), close: l.Close}, nil
}

func pgTransferBatch(t *pgTarget) (executor, error) {
	st, err := hotrowpg.NewLedgerStore[int64](t.pool, hotrowTable(t.table))
	if err != nil {
		return nil, err
	}
	return ledger(st, func(w func(*recorder) opFunc) executor { return pgStrategy(t, w) })
}

func myTransferBatch(t *myTarget) (executor, error) {
	st, err := hotrowmysql.NewLedgerStore[int64](t.db, hotrowTable(t.table))
	if err != nil {
		return nil, err
	}
	return ledger(st, func(w func(*recorder) opFunc) executor { return myStrategy(t, w) })
}

// shardTable is the shard table a sharded cell creates beside its workload
// table.
func shardTable(table string) string { return table + "_shards" }

// shardSeed returns the statement that splits every row of table over
// hotrow.DefaultShards shard rows (shard 0 takes the remainder, exact for
// any sign), with seq the shard numbers as a relation with column g.
func shardSeed(table, shards, seq string) string {
	return "INSERT INTO " + shards + " (id, shard, v) SELECT t.id, s.g, t.v / " + itoa(hotrow.DefaultShards) +
		" + CASE WHEN s.g = 0 THEN t.v - (t.v / " + itoa(hotrow.DefaultShards) + ") * " + itoa(hotrow.DefaultShards) +
		" ELSE 0 END FROM " + table + " t CROSS JOIN " + seq + " s"
}

// shardFold is the statement that writes each key's shard sum back into
// its workload row (the check reads the workload table).
func shardFold(table, shards string) string {
	return "UPDATE " + table + " SET v = (SELECT COALESCE(SUM(s.v), 0) FROM " + shards + " s WHERE s.id = " + table + ".id)"
}

// shardedExec runs every single-row change through one hotrow.Sharded
// counter: a stock decrement is Take, anything else Add. fold writes the
// shard sums back into the workload table when the cell ends (after its
// measured window) and drops the shard table.
func shardedExec(store hotrow.ShardStore[int64], fold func(ctx context.Context) error, wrap func(func(*recorder) opFunc) executor) (executor, error) {
	s, err := hotrow.NewSharded(store, nil)
	if err != nil {
		return nil, err
	}
	return closingExecutor{executor: wrap(func(*recorder) opFunc {
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) != 1 {
				return resDone, errors.New("bench: sharded applies one row change per operation")
			}
			c := o.changes[0]
			if c.floor && c.dv < 0 {
				return hotrowResult(s.Take(ctx, c.key, -c.dv))
			}
			return hotrowResult(s.Add(ctx, c.key, c.dv))
		}
	}), close: func(ctx context.Context) error { return fold(context.WithoutCancel(ctx)) }}, nil
}

// shardSQL is what differs between the databases in a sharded cell's
// setup: the quoted tables, the shard table's DDL and the seed statement.
type shardSQL struct{ table, shards, create, seed string }

// shardTables creates and seeds a sharded cell's shard table through exec
// and returns its fold (see shardedExec).
func shardTables(exec func(ctx context.Context, q string) error, q shardSQL) (fold func(ctx context.Context) error, err error) {
	for _, stmt := range []string{"DROP TABLE IF EXISTS " + q.shards, q.create, q.seed} {
		if err := exec(context.Background(), stmt); err != nil {
			return nil, fmt.Errorf("bench: sharded: %w", err)
		}
	}
	return func(ctx context.Context) error {
		if err := exec(ctx, shardFold(q.table, q.shards)); err != nil {
			return err
		}
		return exec(ctx, "DROP TABLE "+q.shards)
	}, nil
}

func pgSharded(t *pgTarget) (executor, error) {
	shards := pgx.Identifier{shardTable(t.table)}.Sanitize()
	q := shardSQL{table: pgx.Identifier{t.table}.Sanitize(), shards: shards,
		create: "CREATE TABLE " + shards + " (id bigint NOT NULL, shard integer NOT NULL, v bigint NOT NULL, PRIMARY KEY (id, shard))"}
	q.seed = shardSeed(q.table, shards, "(SELECT generate_series(0, "+itoa(hotrow.DefaultShards-1)+") AS g)")
	fold, err := shardTables(func(ctx context.Context, stmt string) error {
		_, err := t.pool.Exec(ctx, stmt)
		return err
	}, q)
	if err != nil {
		return nil, err
	}
	st, err := hotrowpg.NewShardStore[int64](t.pool, hotrowTable(shardTable(t.table)))
	if err != nil {
		return nil, err
	}
	return shardedExec(st, fold, func(w func(*recorder) opFunc) executor { return pgStrategy(t, w) })
}

func mySharded(t *myTarget) (executor, error) {
	seq := "(SELECT 0 AS g"
	for i := 1; i < hotrow.DefaultShards; i++ {
		seq += " UNION ALL SELECT " + itoa(int64(i))
	}
	shards := "`" + shardTable(t.table) + "`"
	q := shardSQL{table: "`" + t.table + "`", shards: shards,
		create: "CREATE TABLE " + shards + " (id BIGINT NOT NULL, shard INT NOT NULL, v BIGINT NOT NULL, PRIMARY KEY (id, shard)) ENGINE=InnoDB"}
	// DIV, not /: MySQL's / is decimal division.
	q.seed = strings.ReplaceAll(shardSeed(q.table, shards, seq+")"), " / ", " DIV ")
	fold, err := shardTables(func(ctx context.Context, stmt string) error {
		_, err := t.db.ExecContext(ctx, stmt)
		return err
	}, q)
	if err != nil {
		return nil, err
	}
	st, err := hotrowmysql.NewShardStore[int64](t.db, hotrowTable(shardTable(t.table)))
	if err != nil {
		return nil, err
	}
	return shardedExec(st, fold, func(w func(*recorder) opFunc) executor { return myStrategy(t, w) })
}

// adaptiveExec runs one hotrow.Adaptive per cell. A single-row change of a
// cold key goes through cas (the cas strategy's read and compare-and-swap);
// of a hot key, or a retry after a conflict, through a Combiner whose
// Store bumps the version column that cas checks (the change commutes). A
// transfer runs as tx: one transaction that locks the plan's keys and
// compare-and-swaps the others.
func adaptiveExec(store hotrow.Store[int64], table string, cas func(ctx context.Context, c change) error,
	tx func(ctx context.Context, p hotrow.Plan[int64], o *op) error, wrap func(func(*recorder) opFunc) executor) (executor, error) {
	a, err := hotrow.NewAdaptive[int64](nil)
	if err != nil {
		return nil, err
	}
	c, err := hotrow.NewCombiner(store, &hotrow.Options{Floor: hotrowFloor(table)})
	if err != nil {
		return nil, err
	}
	return closingExecutor{executor: wrap(func(*recorder) opFunc {
		return func(ctx context.Context, o *op) (result, error) {
			return hotrowResult(a.Do(ctx, sortedKeys(o), func(ctx context.Context, p hotrow.Plan[int64]) error {
				if len(o.changes) != 1 {
					return tx(ctx, p, o)
				}
				ch := o.changes[0]
				if p.Optimistic() {
					return cas(ctx, ch)
				}
				_, err := c.Add(ctx, ch.key, ch.dv)
				return err
			}))
		}
	}), close: c.Close}, nil
}

// versioned is the hotrow.Table of a workload table whose writes bump its
// version column, as the adaptive strategy's Combiner needs.
func versioned(table string) hotrow.Table {
	return hotrow.Table{Name: table, VersionColumn: "version"}
}

// oneAttempt: the transactions of an Adaptive's attempts do not retry on
// their own; Adaptive.Do does, with its keys locked.
var oneAttempt = &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1}}

func pgAdaptive(t *pgTarget) (executor, error) {
	st, err := hotrowpg.NewStore[int64](t.pool, versioned(t.table))
	if err != nil {
		return nil, err
	}
	q := t.queries()
	tbl := optimistic.Table{Name: t.table, KeyColumn: "id", VersionColumn: "version"}
	write := func(ctx context.Context, db hotrowpg.DBTX, locked bool, c change) error {
		nv, nw, ver, err := pgReadApply(ctx, db, q, c)
		if err != nil {
			return err
		}
		if locked {
			_, err = db.Exec(ctx, q.writeVersioned, c.key, nv, nw)
		} else {
			_, err = optimisticpg.Update(ctx, db, tbl, c.key, ver, map[string]any{"v": nv, "w": nw})
		}
		return err
	}
	lock := pessimistic.Lock{Strength: pessimistic.ForUpdate}
	return adaptiveExec(st, t.table,
		func(ctx context.Context, c change) error { return write(ctx, t.pool, false, c) },
		func(ctx context.Context, p hotrow.Plan[int64], o *op) error {
			return pessimisticpg.InTx(ctx, t.pool, oneAttempt, func(ctx context.Context, tx pgx.Tx) error {
				if !p.Optimistic() {
					if _, err := pessimisticpg.LockRows(ctx, tx, t.table, "id", p.Lock, lock); err != nil {
						return err
					}
				}
				for _, c := range o.changes {
					if err := write(ctx, tx, p.Locked(c.key), c); err != nil {
						return err
					}
				}
				return nil
			})
		},
		func(w func(*recorder) opFunc) executor { return pgStrategy(t, w) })
}

func myAdaptive(t *myTarget) (executor, error) {
	st, err := hotrowmysql.NewStore[int64](t.db, versioned(t.table))
	if err != nil {
		return nil, err
	}
	q := t.queries()
	tbl := optimistic.Table{Name: t.table, KeyColumn: "id", VersionColumn: "version"}
	write := func(ctx context.Context, db optimisticmysql.DBTX, locked bool, c change) error {
		nv, nw, ver, err := myReadApply(ctx, db, q, c)
		if err != nil {
			return err
		}
		if locked {
			_, err = db.ExecContext(ctx, q.writeVersioned, nv, nw, c.key)
		} else {
			_, err = optimisticmysql.Update(ctx, db, tbl, c.key, ver, map[string]any{"v": nv, "w": nw})
		}
		return err
	}
	lock := pessimistic.Lock{Strength: pessimistic.ForUpdate}
	return adaptiveExec(st, t.table,
		func(ctx context.Context, c change) error { return write(ctx, t.db, false, c) },
		func(ctx context.Context, p hotrow.Plan[int64], o *op) error {
			return pessimisticmysql.InTx(ctx, t.db, oneAttempt, func(ctx context.Context, tx *sql.Tx) error {
				if !p.Optimistic() {
					if _, err := pessimisticmysql.LockRows(ctx, tx, t.table, "id", p.Lock, lock); err != nil {
						return err
					}
				}
				for _, c := range o.changes {
					if err := write(ctx, tx, p.Locked(c.key), c); err != nil {
						return err
					}
				}
				return nil
			})
		},
		func(w func(*recorder) opFunc) executor { return myStrategy(t, w) })
}
