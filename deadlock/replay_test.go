package deadlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/deadlock"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/testkit"
)

// The replay cross-check. A schedule is a list of transactions, each an
// ordered list of rows it locks exclusively (SELECT ... FOR UPDATE), then
// COMMIT. A seeded chooser drives it one step at a time: it picks a
// transaction that is not blocked, issues its next step on the database
// and on a deadlock.LockManager, and waits until the database step has
// either completed or is observed blocked in a lock wait (pg_stat_activity
// wait_event_type = 'Lock'; for MariaDB the live process list, see
// myBlocked) — never a sleep. The simulator's answer decides what to
// expect:
//
//   - Granted: the statement completes without error.
//   - Waiting with no cycle through the new wait: the session is observed
//     blocked, and stays blocked until the simulator grants it.
//   - Waiting with a cycle (FindCycle): the database reports a deadlock
//     (40P01 / 1213) on one of the blocked sessions, and that victim lies
//     on a cycle of the simulator's wait-for graph. Both sides then abort
//     that victim (the databases choose victims differently: PostgreSQL
//     the session whose deadlock_timeout fired, InnoDB the "lightest"
//     transaction). PostgreSQL occasionally aborts a second member of the
//     same cycle (two backends' checks overlapping); such an extra victim
//     must also have been on a cycle, and is counted separately.
//   - If a cycle remains after the victim leaves (its waiters moved on to
//     their next lock), the server must report that deadlock too.
//
// After every release (commit or victim rollback) the sessions the
// simulator grants must complete, and every transaction the simulator keeps
// waiting must still be blocked on the server, with no error delivered. So
// a deadlock reported by the server and not by the simulator, or the other
// way round, fails the test, as does any difference in who waits.
//
// Only exclusive row locks are replayed: PostgreSQL's FOR SHARE lets new
// share lockers pass a waiting writer and InnoDB queues an S→X upgrade
// behind waiting writers, two queueing rules that differ from each other
// and from the textbook FIFO-with-upgrade-priority the simulator models.

type schedule struct {
	seed uint64
	rows int
	txns [][]int // rows locked by each transaction, in order
}

func genSchedule(seed uint64) schedule {
	rng := rand.New(rand.NewPCG(seed, 0xdead10c))
	s := schedule{seed: seed, rows: 2 + rng.IntN(4)}
	n := 2 + rng.IntN(3)
	for range n {
		k := 1 + rng.IntN(min(3, s.rows))
		s.txns = append(s.txns, rng.Perm(s.rows)[:k])
	}
	return s
}

type replayDB interface {
	setup(ctx context.Context, rows int) error
	open(ctx context.Context) (replayTxn, error)
	blocked(ctx context.Context, tx replayTxn) (bool, error)
}

type replayTxn interface {
	lock(ctx context.Context, row int) error
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
	close()
}

type replayStats struct {
	schedules, deadlocks, extraVictims, waits, grants int
}

// errDeadlockCheck tells the driver a statement ended in a deadlock.
func isDeadlock(err error) bool {
	return sqlerr.Classify(err) == sqlerr.Deadlock || mysqlerr.Classify(err) == sqlerr.Deadlock
}

const settle = 10 * time.Second // failure detection only, never synchronisation

func runReplay(ctx context.Context, db replayDB, s schedule, st *replayStats) (err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang becomes an error
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	n := len(s.txns)
	txs := make([]replayTxn, n)
	defer func() {
		for _, tx := range txs {
			if tx != nil {
				tx.close()
			}
		}
	}()
	for i := range txs {
		if txs[i], err = db.open(ctx); err != nil {
			return err
		}
	}
	var lm deadlock.LockManager
	id := func(i int) deadlock.TxnID { return deadlock.TxnID(i + 1) }
	next := make([]int, n)
	early := make([]*error, n) // results seen while waiting for a deadlock error
	// members holds the transactions on a wait-for cycle during the current
	// deadlock: PostgreSQL may abort more than one of them (two backends'
	// deadlock_timeout checks can both find the cycle before either
	// victim has left it), so a deadlock error from any of them is part of
	// the same deadlock.
	members := map[int]bool{}
	done := make([]bool, n)
	pending := make([]chan error, n) // in-flight statement's result
	var log []string
	logf := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	defer func() {
		if err != nil {
			if d, ok := db.(interface {
				diag(context.Context, []replayTxn) string
			}); ok {
				log = append(log, d.diag(context.WithoutCancel(ctx), txs))
			}
			err = fmt.Errorf("%w\nsteps:\n  %s", err, strings.Join(log, "\n  "))
		}
	}()
	issue := func(i, row int) {
		ch := make(chan error, 1)
		pending[i] = ch
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch <- txs[i].lock(ctx, row)
		}()
	}
	// await waits for transaction i's in-flight statement to finish.
	await := func(i int) error {
		if early[i] != nil {
			err := *early[i]
			early[i], pending[i] = nil, nil
			return err
		}
		select {
		case err := <-pending[i]:
			pending[i] = nil
			return err
		case <-time.After(settle):
			return fmt.Errorf("T%d: statement did not finish", i+1)
		}
	}
	// stillBlocked checks every transaction the simulator keeps waiting.
	var abortVictim func(i int) error
	// stillBlocked checks every transaction the simulator keeps waiting:
	// each must still be blocked on the server. A session the server
	// released meanwhile must be explained by a deadlock victim: its
	// deadlock error may arrive after the release it caused (the server
	// aborts, and so releases, at the error; the client reads it later),
	// so victims are rolled back on the simulator first and the check
	// runs again.
	stillBlocked := func() error {
		rechecked := false
		for {
			bad, victim := -1, -1
			for i := range n {
				if _, _, w := lm.Waiting(id(i)); !w {
					continue
				}
				if early[i] == nil {
					// Blocked, or finished? PostgreSQL passes through a
					// moment between two lock waits (tuple lock, then the
					// holder's transaction ID) and shows the state before
					// the client reads the result, so poll until one of
					// the two is seen.
					deadline := time.Now().Add(settle)
				poll:
					for {
						select {
						case err := <-pending[i]:
							early[i] = &err
							break poll
						default:
						}
						b, err := db.blocked(ctx, txs[i])
						if err != nil {
							return err
						}
						if b {
							break
						}
						if time.Now().After(deadline) {
							return fmt.Errorf("T%d: neither blocked nor finished", i+1)
						}
					}
				}
				if early[i] == nil {
					continue
				}
				if isDeadlock(*early[i]) && (members[i] || lm.FindCycle(id(i)) != nil) {
					if victim < 0 {
						victim = i
					}
				} else if bad < 0 {
					bad = i
				}
			}
			if bad < 0 {
				return nil
			}
			if victim < 0 && !rechecked {
				// A session seen blocked earlier in this pass may have
				// been the victim whose abort released this one: look
				// again, now that the release has happened.
				rechecked = true
				continue
			}
			if victim < 0 {
				return fmt.Errorf("T%d: simulator says waiting, server finished the step (err=%v)", bad+1, *early[bad])
			}
			rechecked = false
			early[victim], pending[victim] = nil, nil
			if lm.FindCycle(id(victim)) != nil {
				st.deadlocks++
				logf("server victim T%d", victim+1)
			} else {
				st.extraVictims++
				logf("server also aborted T%d", victim+1)
			}
			if err := abortVictim(victim); err != nil {
				return err
			}
		}
	}
	wake := func(grants []deadlock.Grant) error {
		var extra []int
		for _, g := range grants {
			i := int(g.Txn) - 1
			if err := await(i); err != nil {
				if isDeadlock(err) && members[i] {
					extra = append(extra, i)
					continue
				}
				var pe *pgconn.PgError
				if errors.As(err, &pe) {
					err = fmt.Errorf("%w [%s]", err, pe.Detail)
				}
				return fmt.Errorf("T%d granted r%d by the simulator: %w", i+1, g.Resource, err)
			}
			next[i]++
			st.grants++
		}
		for _, i := range extra {
			logf("server also aborted T%d", i+1)
			st.extraVictims++
			if err := abortVictim(i); err != nil {
				return err
			}
		}
		return stillBlocked()
	}
	abortVictim = func(i int) error {
		if err := txs[i].rollback(ctx); err != nil {
			return fmt.Errorf("T%d rollback: %w", i+1, err)
		}
		done[i] = true
		return wake(lm.Release(id(i)))
	}
	// breakDeadlock expects the server to report the deadlock the simulator
	// found, rolls the server's victim back on both sides and returns the
	// next cycle left in the simulator's graph, if any: after the victim
	// goes, waiters move on to the next lock and may close another cycle,
	// which the server must report too.
	breakDeadlock := func(cycle []deadlock.TxnID) ([]deadlock.TxnID, error) {
		logf("simulator cycle %v", cycle)
		for j := range n {
			if lm.FindCycle(id(j)) != nil {
				members[j] = true
			}
		}
		victim, err := awaitDeadlock(pending, early, settle)
		if err != nil {
			return nil, fmt.Errorf("simulator found deadlock %v: %w", cycle, err)
		}
		// The server may break the deadlock at another cycle than the
		// shortest one the simulator reports (PostgreSQL: the session whose
		// deadlock_timeout fires first searches from itself), so the victim
		// must lie on some wait-for cycle of the simulator's graph.
		if !members[victim] {
			return nil, fmt.Errorf("server victim T%d is on no cycle of the simulator's wait-for graph (cycle found: %v)", victim+1, cycle)
		}
		logf("server victim T%d", victim+1)
		st.deadlocks++
		if err := abortVictim(victim); err != nil {
			return nil, err
		}
		for j := range n {
			if c := lm.FindCycle(id(j)); c != nil {
				return c, nil
			}
		}
		// No cycle left: a deadlock error still pending for a former
		// member is an extra victim of this deadlock.
		for j, e := range early {
			if e != nil && isDeadlock(*e) && members[j] {
				early[j], pending[j] = nil, nil
				logf("server also aborted T%d", j+1)
				st.extraVictims++
				if err := abortVictim(j); err != nil {
					return nil, err
				}
			}
		}
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(s.seed, 1))
	for {
		var runnable []int
		for i := range n {
			if _, _, w := lm.Waiting(id(i)); !done[i] && !w {
				runnable = append(runnable, i)
			}
		}
		if len(runnable) == 0 {
			for i := range n {
				if !done[i] {
					return fmt.Errorf("T%d blocked forever with no deadlock found", i+1)
				}
			}
			return nil
		}
		i := runnable[rng.IntN(len(runnable))]
		if next[i] == len(s.txns[i]) {
			logf("T%d commit", i+1)
			if err := txs[i].commit(ctx); err != nil {
				return fmt.Errorf("T%d commit: %w", i+1, err)
			}
			done[i] = true
			if err := wake(lm.Release(id(i))); err != nil {
				return err
			}
			continue
		}
		row := s.txns[i][next[i]]
		status, err := lm.Acquire(id(i), deadlock.Resource(row), deadlock.Exclusive)
		if err != nil {
			return err
		}
		logf("T%d lock r%d: simulator %s", i+1, row, status)
		issue(i, row)
		if status == deadlock.Granted {
			if err := await(i); err != nil {
				return fmt.Errorf("T%d lock r%d: simulator granted, server: %w", i+1, row, err)
			}
			next[i]++
			continue
		}
		st.waits++
		cycle := lm.FindCycle(id(i))
		if cycle == nil {
			// Wait until the server shows the session blocked.
			deadline := time.Now().Add(settle)
			for {
				select {
				case err := <-pending[i]:
					return fmt.Errorf("T%d lock r%d: simulator says wait, server finished (err=%v)", i+1, row, err)
				default:
				}
				b, err := db.blocked(ctx, txs[i])
				if err != nil {
					return err
				}
				if b {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("T%d lock r%d: never seen blocked", i+1, row)
				}
			}
			if err := stillBlocked(); err != nil {
				return err
			}
			continue
		}
		clear(members)
		for cycle != nil {
			if cycle, err = breakDeadlock(cycle); err != nil {
				return err
			}
		}
	}
}

// awaitDeadlock waits for one in-flight statement to end with a deadlock
// error and returns its transaction. Statements that complete meanwhile
// (InnoDB rolls the victim back itself, so its locks go at once) are kept
// in early for the caller to match against the simulator's grants.
func awaitDeadlock(pending []chan error, early []*error, timeout time.Duration) (int, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for i, e := range early {
		if e != nil && isDeadlock(*e) {
			early[i], pending[i] = nil, nil
			return i, nil
		}
	}
	for {
		// Poll the in-flight statements in a fixed order; block on the
		// timer only when none has finished.
		for i, ch := range pending {
			if ch == nil {
				continue
			}
			if early[i] != nil {
				continue
			}
			select {
			case err := <-ch:
				if isDeadlock(err) {
					pending[i] = nil
					return i, nil
				}
				early[i] = &err
			default:
			}
		}
		select {
		case <-timer.C:
			return 0, errors.New("server reported no deadlock")
		case <-time.After(time.Millisecond):
		}
	}
}

func replayMany(t testing.TB, db replayDB, from, count uint64) replayStats {
	t.Helper()
	ctx := t.Context()
	if err := db.setup(ctx, 8); err != nil {
		t.Fatal(err)
	}
	var st replayStats
	for seed := from; seed < from+count; seed++ {
		s := genSchedule(seed)
		if err := runReplay(ctx, db, s, &st); err != nil {
			t.Fatalf("schedule seed %d %v: %v", seed, s.txns, err)
		}
		st.schedules++
	}
	return st
}

// --- PostgreSQL ---

type pgReplay struct{ pool *pgxpool.Pool }

const (
	pgCreateRows = `CREATE TABLE IF NOT EXISTS replay_rows (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)`
	pgFillRows   = `INSERT INTO replay_rows (id) SELECT g FROM generate_series(0, $1 - 1) g ON CONFLICT DO NOTHING`
	pgLockRow    = `SELECT v FROM replay_rows WHERE id = $1 FOR UPDATE`
	pgBackendPID = `SELECT pg_backend_pid()`
	pgBlocked    = `SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1`
)

func (p pgReplay) setup(ctx context.Context, rows int) error {
	if _, err := p.pool.Exec(ctx, pgCreateRows); err != nil {
		return err
	}
	_, err := p.pool.Exec(ctx, pgFillRows, rows)
	return err
}

type pgTxn struct {
	conn *pgxpool.Conn
	tx   pgx.Tx
	pid  int32
}

func (p pgReplay) open(ctx context.Context) (replayTxn, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	t := &pgTxn{conn: conn}
	if err := conn.QueryRow(ctx, pgBackendPID).Scan(&t.pid); err != nil {
		conn.Release()
		return nil, err
	}
	t.tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err == nil {
		// Detect quickly; lock_timeout only turns a bug into an error.
		_, err = t.tx.Exec(ctx, `SET LOCAL deadlock_timeout = '20ms'; SET LOCAL lock_timeout = '30s'`)
	}
	if err != nil {
		conn.Release()
		return nil, err
	}
	return t, nil
}

func (t *pgTxn) lock(ctx context.Context, row int) error {
	var v int
	return t.tx.QueryRow(ctx, pgLockRow, row).Scan(&v)
}
func (t *pgTxn) commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t *pgTxn) rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
func (t *pgTxn) close() {
	_ = t.tx.Rollback(context.Background())
	t.conn.Release()
}

func (p pgReplay) blocked(ctx context.Context, tx replayTxn) (bool, error) {
	var b bool
	err := p.pool.QueryRow(ctx, pgBlocked, tx.(*pgTxn).pid).Scan(&b)
	return b, err
}

func (p pgReplay) diag(ctx context.Context, txs []replayTxn) string {
	var b strings.Builder
	for i, tx := range txs {
		if tx == nil {
			continue
		}
		var state, wait, q string
		_ = p.pool.QueryRow(ctx, `SELECT coalesce(state,''), coalesce(wait_event_type,'')||':'||coalesce(wait_event,''), coalesce(backend_xid::text,'') FROM pg_stat_activity WHERE pid = $1`, tx.(*pgTxn).pid).Scan(&state, &wait, &q)
		fmt.Fprintf(&b, "T%d pid %d xid %s: %s %s\n  ", i+1, tx.(*pgTxn).pid, q, state, wait)
	}
	return b.String()
}

// --- MariaDB / MySQL ---

type myReplay struct{ db *sql.DB }

const (
	myCreateRows = "CREATE TABLE IF NOT EXISTS replay_rows (id INT PRIMARY KEY, v INT NOT NULL DEFAULT 0) ENGINE=InnoDB"
	myFillRow    = "INSERT IGNORE INTO replay_rows (id) VALUES (?)"
	myLockRow    = "SELECT v FROM replay_rows WHERE id = ? FOR UPDATE"
	myConnID     = "SELECT CONNECTION_ID()"
	// information_schema.innodb_trx (trx_state 'LOCK WAIT') is a cache that
	// InnoDB refreshes only after 100ms without readers, so polling it
	// never sees a new wait. The process list is live: a primary-key
	// SELECT ... FOR UPDATE waits for its row lock in the optimizer's
	// const-table read, shown as state 'Statistics' while it waits.
	myBlocked  = "SELECT COUNT(*) FROM information_schema.processlist WHERE id = ? AND command IN ('Query', 'Execute') AND state = 'Statistics'"
	myLockWait = "SET SESSION innodb_lock_wait_timeout = 30"
)

func (m myReplay) setup(ctx context.Context, rows int) error {
	if _, err := m.db.ExecContext(ctx, myCreateRows); err != nil {
		return err
	}
	for i := range rows {
		if _, err := m.db.ExecContext(ctx, myFillRow, i); err != nil {
			return err
		}
	}
	return nil
}

type myTxn struct {
	conn *sql.Conn
	tx   *sql.Tx
	id   int64
}

func (m myReplay) open(ctx context.Context) (replayTxn, error) {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	t := &myTxn{conn: conn}
	err = conn.QueryRowContext(ctx, myConnID).Scan(&t.id)
	if err == nil {
		_, err = conn.ExecContext(ctx, myLockWait)
	}
	if err == nil {
		t.tx, err = conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return t, nil
}

func (t *myTxn) lock(ctx context.Context, row int) error {
	var v int
	return t.tx.QueryRowContext(ctx, myLockRow, row).Scan(&v)
}
func (t *myTxn) commit(ctx context.Context) error   { return t.tx.Commit() }
func (t *myTxn) rollback(ctx context.Context) error { return t.tx.Rollback() }
func (t *myTxn) close() {
	_ = t.tx.Rollback()
	t.conn.Close()
}

func (m myReplay) blocked(ctx context.Context, tx replayTxn) (bool, error) {
	var n int
	err := m.db.QueryRowContext(ctx, myBlocked, tx.(*myTxn).id).Scan(&n)
	return n > 0, err
}

// --- tests ---

const replaySchedules = 200

func TestReplayPostgres(t *testing.T) {
	st := replayMany(t, pgReplay{pool: testkit.Postgres(t)}, 1, replaySchedules)
	t.Logf("PostgreSQL: %d schedules, %d deadlocks agreed (%d extra victims), %d waits agreed, %d grants agreed", st.schedules, st.deadlocks, st.extraVictims, st.waits, st.grants)
	if st.deadlocks == 0 {
		t.Fatal("no schedule deadlocked: the generator is too tame to test anything")
	}
}

func TestReplayMariaDB(t *testing.T) {
	st := replayMany(t, myReplay{db: testkit.MySQL(t)}, 1, replaySchedules)
	t.Logf("MariaDB: %d schedules, %d deadlocks agreed (%d extra victims), %d waits agreed, %d grants agreed", st.schedules, st.deadlocks, st.extraVictims, st.waits, st.grants)
	if st.deadlocks == 0 {
		t.Fatal("no schedule deadlocked: the generator is too tame to test anything")
	}
}

// BenchmarkReplay runs b.N schedules per server (seeds 1..b.N) and reports
// the agreement counts; run it with -benchtime 1000x for the 1,000-schedule
// figure. Any disagreement fails the benchmark.
func BenchmarkReplay(b *testing.B) {
	for _, c := range []struct {
		name string
		db   func(testing.TB) replayDB
	}{
		{"postgres", func(tb testing.TB) replayDB { return pgReplay{pool: testkit.Postgres(tb)} }},
		{"mariadb", func(tb testing.TB) replayDB { return myReplay{db: testkit.MySQL(tb)} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			db := c.db(b)
			if err := db.setup(b.Context(), 8); err != nil {
				b.Fatal(err)
			}
			var st replayStats
			seed := uint64(1)
			for b.Loop() {
				if err := runReplay(b.Context(), db, genSchedule(seed), &st); err != nil {
					b.Fatalf("schedule seed %d: %v", seed, err)
				}
				seed++
				st.schedules++
			}
			b.ReportMetric(float64(st.schedules), "schedules")
			b.ReportMetric(float64(st.deadlocks), "deadlocks-agreed")
			b.ReportMetric(float64(st.extraVictims), "extra-victims")
			b.ReportMetric(float64(st.waits), "waits-agreed")
		})
	}
}
