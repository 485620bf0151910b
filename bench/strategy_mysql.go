package bench

// MariaDB/MySQL strategies (database/sql + go-sql-driver/mysql). Every
// concurkit call of the MySQL path is in this file; see strategies.go.

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
	"github.com/concurkit/concurkit/internal/galera"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

// The benchmark's own statements (%s is the quoted table).
const (
	myReadRow   = "SELECT v, w, version FROM %s WHERE id = ?"
	myReadValue = "SELECT v FROM %s WHERE id = ?"
	myWriteRow  = "UPDATE %s SET v = ?, w = ? WHERE id = ?"
	// myWriteVersioned is myWriteRow for a row others compare-and-swap
	// (the adaptive strategy's locked keys).
	myWriteVersioned = "UPDATE %s SET v = ?, w = ?, version = version + 1 WHERE id = ?"
	// myAddRow is the reference statement; the floor is in the WHERE
	// clause, so 0 rows means "refused" (every matching row changes, so
	// the count does not depend on the DSN's clientFoundRows).
	myAddRow = "UPDATE %s SET v = v + ?, w = w + ? WHERE id = ? AND (NOT ? OR v + ? >= 0)"
)

// myTarget is what a MariaDB strategy works on in one cell.
type myTarget struct {
	db         *sql.DB
	table      string
	readMode   string
	locks      *lockClients
	lockPrefix string
	galera     bool // the server is a Galera node: no token sequence
}

type myQueries struct{ readRow, readValue, writeRow, writeVersioned, addRow string }

func (t *myTarget) queries() myQueries {
	q := "`" + t.table + "`" // a fixed workload table name
	return myQueries{
		readRow:        fmt.Sprintf(myReadRow, q),
		readValue:      fmt.Sprintf(myReadValue, q),
		writeRow:       fmt.Sprintf(myWriteRow, q),
		writeVersioned: fmt.Sprintf(myWriteVersioned, q),
		addRow:         fmt.Sprintf(myAddRow, q),
	}
}

type myQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func myReadApply(ctx context.Context, db myQueryer, q myQueries, c change) (nv, nw, version int64, err error) {
	var v, w int64
	if err := db.QueryRowContext(ctx, q.readRow, c.key).Scan(&v, &w, &version); err != nil {
		return 0, 0, 0, err
	}
	nv, nw, ok := c.apply(v, w)
	if !ok {
		return 0, 0, 0, errRejected
	}
	return nv, nw, version, nil
}

// myReader is pgReader for MariaDB: FOR SHARE is LOCK IN SHARE MODE.
func myReader(t *myTarget, rec *recorder) func(ctx context.Context, key int64) error {
	q := t.queries()
	if t.readMode == ReadShare {
		opts := &pessimistic.Options{Retry: observedPolicy(rec)}
		lock := pessimistic.Lock{Strength: pessimistic.ForShare}
		return func(ctx context.Context, key int64) error {
			return pessimisticmysql.InTx(ctx, t.db, opts, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := pessimisticmysql.LockRows(ctx, tx, t.table, "id", []int64{key}, lock); err != nil {
					return err
				}
				var v int64
				return tx.QueryRowContext(ctx, q.readValue, key).Scan(&v)
			})
		}
	}
	return func(ctx context.Context, key int64) error {
		var v int64
		return t.db.QueryRowContext(ctx, q.readValue, key).Scan(&v)
	}
}

func myStrategy(t *myTarget, write func(rec *recorder) opFunc) executor {
	return execFunc(func(rec *recorder) opFunc {
		read := myReader(t, rec)
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

func myCAS(t *myTarget) (executor, error) {
	q := t.queries()
	tbl := optimistic.Table{Name: t.table, KeyColumn: "id", VersionColumn: "version"}
	return myStrategy(t, func(rec *recorder) opFunc {
		pol := observedPolicy(rec)
		txOpts := &pessimistic.Options{Retry: pol}
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) == 1 {
				c := o.changes[0]
				return rejected(optimistic.Do(ctx, pol, func(ctx context.Context) error {
					nv, nw, ver, err := myReadApply(ctx, t.db, q, c)
					if err != nil {
						return err
					}
					_, err = optimisticmysql.Update(ctx, t.db, tbl, c.key, ver, map[string]any{"v": nv, "w": nw})
					return err
				}))
			}
			return rejected(pessimisticmysql.InTx(ctx, t.db, txOpts, func(ctx context.Context, tx *sql.Tx) error {
				for _, c := range o.changes {
					nv, nw, ver, err := myReadApply(ctx, tx, q, c)
					if err != nil {
						return err
					}
					if _, err := optimisticmysql.Update(ctx, tx, tbl, c.key, ver, map[string]any{"v": nv, "w": nw}); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	}), nil
}

func myInTx(t *myTarget, opts pessimistic.Options, lock func(ctx context.Context, tx *sql.Tx, o *op) error) executor {
	q := t.queries()
	return myStrategy(t, func(rec *recorder) opFunc {
		o2 := opts
		o2.Retry = observedPolicy(rec)
		return func(ctx context.Context, o *op) (result, error) {
			return rejected(pessimisticmysql.InTx(ctx, t.db, &o2, func(ctx context.Context, tx *sql.Tx) error {
				if lock != nil {
					if err := lock(ctx, tx, o); err != nil {
						return err
					}
				}
				for _, c := range o.changes {
					nv, nw, _, err := myReadApply(ctx, tx, q, c)
					if err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, q.writeRow, nv, nw, c.key); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	})
}

// myLocked locks the rows FOR UPDATE (MariaDB has no FOR NO KEY UPDATE).
func myLocked(w pessimistic.WaitPolicy, retryNotAvailable bool) func(t *myTarget) (executor, error) {
	return func(t *myTarget) (executor, error) {
		lock := pessimistic.Lock{Strength: pessimistic.ForUpdate, Wait: w}
		return myInTx(t, pessimistic.Options{RetryLockNotAvailable: retryNotAvailable},
			func(ctx context.Context, tx *sql.Tx, o *op) error {
				_, err := pessimisticmysql.LockRows(ctx, tx, t.table, "id", sortedKeys(o), lock)
				return err
			}), nil
	}
}

func mySerializable(t *myTarget) (executor, error) {
	return myInTx(t, pessimistic.Options{Isolation: sql.LevelSerializable}, nil), nil
}

func mySingle(t *myTarget) (executor, error) {
	q := t.queries()
	add := func(ctx context.Context, db myQueryer, c change) error {
		res, err := db.ExecContext(ctx, q.addRow, c.dv, c.dw, c.key, c.floor, c.dv)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return errRejected
		}
		return nil
	}
	return myStrategy(t, func(rec *recorder) opFunc {
		pol := observedPolicy(rec)
		opts := &pessimistic.Options{Retry: pol}
		return func(ctx context.Context, o *op) (result, error) {
			if len(o.changes) == 1 {
				// Retried only where the statement can fail as a whole:
				// a Galera certification failure (see retryable).
				return rejected(retry.Do(ctx, pol, func(ctx context.Context) error { return add(ctx, t.db, o.changes[0]) }))
			}
			return rejected(pessimisticmysql.InTx(ctx, t.db, opts, func(ctx context.Context, tx *sql.Tx) error {
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

func myLossy(t *myTarget) (executor, error) {
	q := t.queries()
	return myStrategy(t, func(*recorder) opFunc {
		return func(ctx context.Context, o *op) (result, error) {
			for _, c := range o.changes {
				nv, nw, _, err := myReadApply(ctx, t.db, q, c)
				if err != nil {
					return rejected(err)
				}
				if _, err := t.db.ExecContext(ctx, q.writeRow, nv, nw, c.key); err != nil {
					return resDone, err
				}
			}
			return resDone, nil
		}
	}), nil
}

func myFencedLock(backend string) func(t *myTarget) (executor, error) {
	return func(t *myTarget) (executor, error) {
		var src fenced.Source
		if backend == "redis" && t.galera {
			return nil, fmt.Errorf("%w: redis-fenced takes its tokens from a MariaDB SEQUENCE, and on Galera each node draws from its own copy: its values are not increasing tokens", errSkip)
		}
		if backend == "redis" {
			s, err := fencedmysql.NewSequence(t.db, tokenSequence)
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
		if t.galera {
			// The previous holder may have written through another node,
			// which this one may not have applied yet: under a lease a
			// read must be causal, or the write computed from it loses
			// that update (a higher token is accepted). An autocommit read
			// waits for the node (wsrep_sync_wait); a transaction starts
			// on a connection that waited (galera.Barrier): MariaDB
			// ignores the wait inside one.
			q.readRow = galera.Causal(q.readRow, galera.Read)
		}
		guard := fenced.Table{Name: t.table, KeyColumn: "id", TokenColumn: "max_seen_token"}
		write := func(ctx context.Context, db interface {
			fencedmysql.DBTX
			myQueryer
		}, c change, token fenced.Token) error {
			nv, nw, _, err := myReadApply(ctx, db, q, c)
			if err != nil {
				return err
			}
			return fencedmysql.Update(ctx, db, guard, c.key, token, map[string]any{"v": nv, "w": nw})
		}
		return myStrategy(t, func(rec *recorder) opFunc {
			pol := lockPolicy(rec)
			txOpts := &pessimistic.Options{Retry: observedPolicy(rec)}
			return func(ctx context.Context, o *op) (result, error) {
				return rejected(retry.Do(ctx, pol, func(ctx context.Context) error {
					return withLeases(ctx, locker, t.lockPrefix, t.table, o, rec, func(ctx context.Context, tokens map[int64]fenced.Token) error {
						if len(o.changes) == 1 {
							c := o.changes[0]
							return write(ctx, t.db, c, tokens[c.key])
						}
						var db pessimisticmysql.DBTX = t.db
						if t.galera {
							conn, err := t.db.Conn(ctx)
							if err != nil {
								return err
							}
							defer conn.Close()
							if err := galera.Barrier(ctx, conn); err != nil {
								return err
							}
							db = conn
						}
						return pessimisticmysql.InTx(ctx, db, txOpts, func(ctx context.Context, tx *sql.Tx) error {
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

// myCreateTokenSequence creates the redis strategy's token sequence in the
// benchmark's database (db's default database).
func myCreateTokenSequence(ctx context.Context, db *sql.DB) error {
	return fencedmysql.CreateSequence(ctx, db, tokenSequence)
}
