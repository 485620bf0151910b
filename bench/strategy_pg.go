package bench

// PostgreSQL strategies (pgx v5). Every concurkit call of the PostgreSQL
// path is in this file; see strategies.go.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
)

// The benchmark's own statements (%s is the quoted table). The table is one
// of the fixed workload tables, found through the pool's search_path.
const (
	pgReadRow   = `SELECT v, w, version FROM %s WHERE id = $1`
	pgReadValue = `SELECT v FROM %s WHERE id = $1`
	pgWriteRow  = `UPDATE %s SET v = $2, w = $3 WHERE id = $1`
	// pgWriteVersioned is pgWriteRow for a row others compare-and-swap
	// (the adaptive strategy's locked keys).
	pgWriteVersioned = `UPDATE %s SET v = $2, w = $3, version = version + 1 WHERE id = $1`
	// pgAddRow is the reference: the change in one statement; the floor is
	// part of the WHERE clause, so 0 rows means "refused".
	pgAddRow = `UPDATE %s SET v = v + $2, w = w + $3 WHERE id = $1 AND (NOT $4 OR v + $2 >= 0)`
)

// executor runs one strategy in one cell; worker returns the function one
// client goroutine calls per operation.
type executor interface {
	worker(rec *recorder) opFunc
}

type opFunc func(ctx context.Context, o *op) (result, error)

type execFunc func(rec *recorder) opFunc

func (f execFunc) worker(rec *recorder) opFunc { return f(rec) }

// pgTarget is what a PostgreSQL strategy works on in one cell.
type pgTarget struct {
	pool       *pgxpool.Pool
	table      string // unquoted, one of the workload tables
	readMode   string
	locks      *lockClients
	lockPrefix string
}

type pgQueries struct{ readRow, readValue, writeRow, writeVersioned, addRow string }

func (t *pgTarget) queries() pgQueries {
	q := pgx.Identifier{t.table}.Sanitize()
	return pgQueries{
		readRow:        fmt.Sprintf(pgReadRow, q),
		readValue:      fmt.Sprintf(pgReadValue, q),
		writeRow:       fmt.Sprintf(pgWriteRow, q),
		writeVersioned: fmt.Sprintf(pgWriteVersioned, q),
		addRow:         fmt.Sprintf(pgAddRow, q),
	}
}

// pgReader returns the mixed workload's read: a plain SELECT (an MVCC
// snapshot, never blocked by writers) or a transaction that takes a FOR
// SHARE lock first (blocks, and is blocked by, writers of the row).
func pgReader(t *pgTarget, rec *recorder) func(ctx context.Context, key int64) error {
	q := t.queries()
	if t.readMode == ReadShare {
		opts := &pessimistic.Options{Retry: observedPolicy(rec)}
		lock := pessimistic.Lock{Strength: pessimistic.ForShare}
		return func(ctx context.Context, key int64) error {
			return pessimisticpg.InTx(ctx, t.pool, opts, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := pessimisticpg.LockRows(ctx, tx, t.table, "id", []int64{key}, lock); err != nil {
					return err
				}
				var v int64
				return tx.QueryRow(ctx, q.readValue, key).Scan(&v)
			})
		}
	}
	return func(ctx context.Context, key int64) error {
		var v int64
		return t.pool.QueryRow(ctx, q.readValue, key).Scan(&v)
	}
}

// pgStrategy wraps a write strategy with the mixed workload's reads.
func pgStrategy(t *pgTarget, write func(rec *recorder) opFunc) executor {
	return execFunc(func(rec *recorder) opFunc {
		read := pgReader(t, rec)
		w := write(rec)
		hooks := retryHooks(rec)
		return func(ctx context.Context, o *op) (result, error) {
			ctx = observe.WithHooks(ctx, hooks)
			if o.read {
				return resRead, read(ctx, o.key)
			}
			return w(ctx, o)
		}
	})
}

// pgReadApply reads the row of c (in a transaction or on the pool) and
// returns its new values and the version read; errRejected when the floor
// refuses the change.
func pgReadApply(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, q pgQueries, c change) (nv, nw, version int64, err error) {
	var v, w int64
	if err := db.QueryRow(ctx, q.readRow, c.key).Scan(&v, &w, &version); err != nil {
		return 0, 0, 0, err
	}
	nv, nw, ok := c.apply(v, w)
	if !ok {
		return 0, 0, 0, errRejected
	}
	return nv, nw, version, nil
}

// rejected turns errRejected into the rejected result.
func rejected(err error) (result, error) {
	if errors.Is(err, errRejected) {
		return resRejected, nil
	}
	if err != nil {
		return resDone, err
	}
	return resDone, nil
}

func pgCAS(t *pgTarget) (executor, error) {
	q := t.queries()
	tbl := optimistic.Table{Name: t.table, KeyColumn: "id", VersionColumn: "version"}
	return pgStrategy(t, func(rec *recorder) opFunc {
		pol := observedPolicy(rec)
		txOpts := &pessimistic.Options{Retry: pol}
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) == 1 {
				c := o.changes[0]
				return rejected(optimistic.Do(ctx, pol, func(ctx context.Context) error {
					nv, nw, ver, err := pgReadApply(ctx, t.pool, q, c)
					if err != nil {
						return err
					}
					_, err = optimisticpg.Update(ctx, t.pool, tbl, c.key, ver, map[string]any{"v": nv, "w": nw})
					return err
				}))
			}
			// Several rows: each CAS in one transaction, which InTx runs
			// again on a conflict or a deadlock.
			return rejected(pessimisticpg.InTx(ctx, t.pool, txOpts, func(ctx context.Context, tx pgx.Tx) error {
				for _, c := range o.changes {
					nv, nw, ver, err := pgReadApply(ctx, tx, q, c)
					if err != nil {
						return err
					}
					if _, err := optimisticpg.Update(ctx, tx, tbl, c.key, ver, map[string]any{"v": nv, "w": nw}); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	}), nil
}

// pgInTx runs the read-modify-write of o in one InTx transaction after
// lock (if any) took its locks.
func pgInTx(t *pgTarget, opts pessimistic.Options, lock func(ctx context.Context, tx pgx.Tx, o *op) error) executor {
	q := t.queries()
	return pgStrategy(t, func(rec *recorder) opFunc {
		o2 := opts
		o2.Retry = observedPolicy(rec)
		return func(ctx context.Context, o *op) (result, error) {
			return rejected(pessimisticpg.InTx(ctx, t.pool, &o2, func(ctx context.Context, tx pgx.Tx) error {
				if lock != nil {
					if err := lock(ctx, tx, o); err != nil {
						return err
					}
				}
				for _, c := range o.changes {
					nv, nw, _, err := pgReadApply(ctx, tx, q, c)
					if err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, q.writeRow, c.key, nv, nw); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	})
}

func pgLocked(s pessimistic.Strength, w pessimistic.WaitPolicy, retryNotAvailable bool) func(t *pgTarget) (executor, error) {
	return func(t *pgTarget) (executor, error) {
		lock := pessimistic.Lock{Strength: s, Wait: w}
		return pgInTx(t, pessimistic.Options{RetryLockNotAvailable: retryNotAvailable},
			func(ctx context.Context, tx pgx.Tx, o *op) error {
				_, err := pessimisticpg.LockRows(ctx, tx, t.table, "id", sortedKeys(o), lock)
				return err
			}), nil
	}
}

func pgSerializable(t *pgTarget) (executor, error) {
	return pgInTx(t, pessimistic.Options{Isolation: sql.LevelSerializable}, nil), nil
}

func pgAdvisory(t *pgTarget) (executor, error) {
	return pgInTx(t, pessimistic.Options{}, func(ctx context.Context, tx pgx.Tx, o *op) error {
		for _, k := range sortedKeys(o) {
			if err := pessimisticpg.AdvisoryXactLock(ctx, tx, pessimistic.AdvisoryKey(lockKey(t.lockPrefix, t.table, k))); err != nil {
				return err
			}
		}
		return nil
	}), nil
}

func pgSingle(t *pgTarget) (executor, error) {
	q := t.queries()
	add := func(ctx context.Context, db interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, c change) error {
		tag, err := db.Exec(ctx, q.addRow, c.key, c.dv, c.dw, c.floor)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errRejected
		}
		return nil
	}
	return pgStrategy(t, func(rec *recorder) opFunc {
		opts := &pessimistic.Options{Retry: observedPolicy(rec)}
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) == 1 {
				return rejected(add(ctx, t.pool, o.changes[0]))
			}
			return rejected(pessimisticpg.InTx(ctx, t.pool, opts, func(ctx context.Context, tx pgx.Tx) error {
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

func pgLossy(t *pgTarget) (executor, error) {
	q := t.queries()
	return pgStrategy(t, func(*recorder) opFunc {
		return func(ctx context.Context, o *op) (result, error) {
			for _, c := range o.changes {
				nv, nw, _, err := pgReadApply(ctx, t.pool, q, c)
				if err != nil {
					return rejected(err)
				}
				if _, err := t.pool.Exec(ctx, q.writeRow, c.key, nv, nw); err != nil {
					return resDone, err
				}
			}
			return resDone, nil
		}
	}), nil
}

// pgFencedLock takes a distributed lock per row (keys in ascending order:
// there is no deadlock detector across lock servers), reads, and writes
// with fenced.UpdatePostgres under the lease's token.
func pgFencedLock(backend string) func(t *pgTarget) (executor, error) {
	return func(t *pgTarget) (executor, error) {
		var src fenced.Source
		if backend == "redis" {
			s, err := fencedpg.NewSequence(t.pool, tokenSequence)
			if err != nil {
				return nil, err
			}
			src = s
		}
		locker, err := t.locks.locker(backend, src)
		if err != nil {
			return nil, err
		}
		q := t.queries()
		guard := fenced.Table{Name: t.table, KeyColumn: "id", TokenColumn: "max_seen_token"}
		write := func(ctx context.Context, db fencedpg.DBTX, c change, token fenced.Token) error {
			nv, nw, _, err := pgReadApply(ctx, db, q, c)
			if err != nil {
				return err
			}
			return fencedpg.Update(ctx, db, guard, c.key, token, map[string]any{"v": nv, "w": nw})
		}
		return pgStrategy(t, func(rec *recorder) opFunc {
			pol := lockPolicy(rec)
			txOpts := &pessimistic.Options{Retry: observedPolicy(rec)}
			return func(ctx context.Context, o *op) (result, error) {
				return rejected(retry.Do(ctx, pol, func(ctx context.Context) error {
					return withLeases(ctx, locker, t.lockPrefix, t.table, o, rec, func(ctx context.Context, tokens map[int64]fenced.Token) error {
						if len(o.changes) == 1 {
							c := o.changes[0]
							return write(ctx, t.pool, c, tokens[c.key])
						}
						return pessimisticpg.InTx(ctx, t.pool, txOpts, func(ctx context.Context, tx pgx.Tx) error {
							for _, c := range o.changes {
								if err := write(ctx, tx, c, tokens[c.key]); err != nil {
									return err
								}
							}
							return nil
						})
					})
				}))
			}
		}), nil
	}
}

// pgCreateTokenSequence creates the redis strategy's token sequence in
// schema (conn's search_path).
func pgCreateTokenSequence(ctx context.Context, conn *pgx.Conn, schema string) error {
	return fencedpg.CreateSequence(ctx, conn, schema, tokenSequence)
}
