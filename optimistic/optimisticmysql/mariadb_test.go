package optimisticmysql_test

import (
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
)

// barrier is a reusable rendezvous for n goroutines.
type barrier struct {
	n     int
	mu    sync.Mutex
	count int
	ch    chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, ch: make(chan struct{})} }

func (b *barrier) wait() {
	b.mu.Lock()
	b.count++
	if b.count == b.n {
		close(b.ch)
		b.ch, b.count = make(chan struct{}), 0
		b.mu.Unlock()
		return
	}
	ch := b.ch
	b.mu.Unlock()
	<-ch
}

// forcedInterleaving runs 32 workers × 50 rounds of a read-then-write
// increment inside REPEATABLE READ transactions on MariaDB. A barrier after
// every worker's read makes all 32 read the same value before any writes,
// and a barrier after the commits starts the next round: the interleaving
// that loses updates happens in every round, by construction, not by luck.
// With cas=false the write is the naive UPDATE … SET value = ?; with
// cas=true it is optimisticmysql.Update with the version read.
func forcedInterleaving(t *testing.T, cas bool) (value, succeeded, conflicts int64) {
	const workers, rounds = 32, 50
	db := myDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO counters (id, value) VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	tbl := optimistic.Table{Name: "counters", KeyColumn: "id", VersionColumn: "version"}
	var (
		afterRead, afterCommit = newBarrier(workers), newBarrier(workers)
		wg                     sync.WaitGroup
		ok, conflict           atomic.Int64
		errs                   = make([]error, workers)
	)
	for i := range workers {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		wg.Go(func() {
			for range rounds {
				// A failed worker keeps meeting the barriers so nobody hangs.
				var tx *sql.Tx
				var v, version int64
				if errs[i] == nil {
					tx, errs[i] = conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
				}
				if errs[i] == nil {
					errs[i] = tx.QueryRowContext(ctx, "SELECT value, version FROM counters WHERE id = 1").Scan(&v, &version)
				}
				afterRead.wait()
				if errs[i] == nil {
					if cas {
						_, err := optimisticmysql.Update(ctx, tx, tbl, 1, version, map[string]any{"value": v + 1})
						switch {
						case err == nil:
							ok.Add(1)
						case errors.Is(err, optimistic.ErrConflict):
							conflict.Add(1)
						default:
							errs[i] = err
						}
					} else {
						if _, errs[i] = tx.ExecContext(ctx, "UPDATE counters SET value = ? WHERE id = 1", v+1); errs[i] == nil {
							ok.Add(1)
						}
					}
				}
				if tx != nil {
					if err := tx.Commit(); err != nil && errs[i] == nil {
						errs[i] = err
					}
				}
				afterCommit.wait()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT value FROM counters WHERE id = 1").Scan(&value); err != nil {
		t.Fatal(err)
	}
	return value, ok.Load(), conflict.Load()
}

// TestLostUpdateWithoutToolkitMariaDB is the negative control: the naive
// read-then-write loop under REPEATABLE READ reports 1,600 successful
// increments but the counter ends at 50 — every round, 31 of 32 writes
// overwrite a value computed from a stale read. This proves the lost-update
// tests can fail.
func TestLostUpdateWithoutToolkitMariaDB(t *testing.T) {
	t.Parallel()
	value, succeeded, _ := forcedInterleaving(t, false)
	t.Logf("naive REPEATABLE READ loop: %d increments reported, counter = %d (%d lost)", succeeded, value, succeeded-value)
	if succeeded != 1600 || value != 50 {
		t.Fatalf("reported %d, counter %d; want 1600 reported and a counter of exactly 50 (updates lost)", succeeded, value)
	}
}

// TestForcedInterleavingWithCASMariaDB runs the same schedule with the CAS:
// in every round exactly one write succeeds and the 31 others get
// ErrConflict, so no increment is lost silently (counter == successes).
func TestForcedInterleavingWithCASMariaDB(t *testing.T) {
	t.Parallel()
	value, succeeded, conflicts := forcedInterleaving(t, true)
	t.Logf("CAS in REPEATABLE READ: %d succeeded, %d conflicts, counter = %d", succeeded, conflicts, value)
	if value != 50 || succeeded != 50 || conflicts != 50*31 {
		t.Fatalf("counter %d, succeeded %d, conflicts %d; want 50, 50, %d", value, succeeded, conflicts, 50*31)
	}
}

// TestUpdateKeepsLastInsertID: a CAS between an INSERT and the
// statement that uses its LAST_INSERT_ID() must not change it, whatever the
// CAS's outcome (success, conflict, missing row). The common pattern
// INSERT parent; …; INSERT child (parent_id = LAST_INSERT_ID()) would
// otherwise link the child to a marker.
func TestUpdateKeepsLastInsertID(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	for _, ddl := range []string{
		"CREATE TABLE parents (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(16) NOT NULL) ENGINE=InnoDB AUTO_INCREMENT=1000",
		"CREATE TABLE children (id BIGINT AUTO_INCREMENT PRIMARY KEY, parent_id BIGINT NOT NULL) ENGINE=InnoDB",
		"INSERT INTO counters (id) VALUES (1)",
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	// LAST_INSERT_ID() is per connection: one *sql.Conn for the sequence.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tbl := optimistic.Table{Name: "counters", KeyColumn: "id", VersionColumn: "version"}
	version := int64(1)
	for _, step := range []struct {
		name string
		cas  func() error
	}{
		{"success", func() error {
			v, err := optimisticmysql.Update(ctx, conn, tbl, 1, version, map[string]any{"value": version})
			version = v
			return err
		}},
		{"conflict", func() error {
			_, err := optimisticmysql.Update(ctx, conn, tbl, 1, version+5, nil)
			if errors.Is(err, optimistic.ErrConflict) {
				return nil
			}
			return err
		}},
		{"not found", func() error {
			_, err := optimisticmysql.Update(ctx, conn, tbl, 404, 1, nil)
			if errors.Is(err, optimistic.ErrNotFound) {
				return nil
			}
			return err
		}},
	} {
		res, err := conn.ExecContext(ctx, "INSERT INTO parents (name) VALUES (?)", step.name)
		if err != nil {
			t.Fatal(err)
		}
		parent, _ := res.LastInsertId()
		if err := step.cas(); err != nil {
			t.Fatalf("%s: CAS: %v", step.name, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO children (parent_id) VALUES (LAST_INSERT_ID())"); err != nil {
			t.Fatal(err)
		}
		var linked int64
		if err := conn.QueryRowContext(ctx, "SELECT parent_id FROM children ORDER BY id DESC LIMIT 1").Scan(&linked); err != nil {
			t.Fatal(err)
		}
		if linked != parent {
			t.Fatalf("after a CAS %s the child links to %d; want the parent %d", step.name, linked, parent)
		}
	}
}
