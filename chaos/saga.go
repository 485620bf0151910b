package chaos

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/sagamysql"
	"github.com/concurkit/concurkit/saga/sagapg"
)

// sagaWorkload runs sagas of package saga on the sagapg or sagamysql store
// (backend "postgres" or "mysql") from every client process at once, and
// checks that one instance is never run by two runners at a time, that a
// recorded step is never run again, and that a compensated saga undid
// every step it did.
//
// The definition has three steps, s1 to s3, each with a compensation. The
// saga of a key fails deterministically at step 2 or 3 for a share of the
// keys (Options["fail"], decided by a hash of the key, carried in the
// saga's input): that action returns a permanent error before doing
// anything, and the saga compensates the steps before it. Every other
// action, and every compensation, is a step execution: a transaction on
// the process's own handle to the database that holds the sagas, which
// takes its time — 20–100 ms, or for a share of the executions
// (Options["long"]) 1–2× the TTL, which only the lease's heartbeat lets
// finish — and then writes an effect row: the key, the step, action or
// compensation, the process, the run (the Seq of the run's operation),
// Call.Attempt, and the wall-clock start and end of the execution, both
// read inside the step. The step checks its context after reading its end
// and writes with it, as the saga package asks of a step, so that the
// recorded interval lies within its lease. The effect row is an outside
// effect all the same — the store records the step in a write of its own,
// and the package offers no hook to share it — so the package promises at
// least once per step, not exactly once, and the checker holds it to
// that.
//
// Each client process has a pool of Options["conns"] connections, by
// default one in odd processes and two in even ones (see sagaConns). With
// one, a step's transaction holds it and the holder cannot extend its
// lease until the step ends: the lease must end the step in time while
// other processes claim the instance — the case in which the saga
// heartbeat, when it checked the lease only after an extension returned,
// let two runners execute one step.
//
// Client processes share one endless stream of keys: each runs key n at
// its n-th iteration, so that every key is raced for by the processes that
// get there together, and those turned away (ErrInProgress) move on.
// Before each key a process runs the recovery job the package documents:
// the store's Unfinished instances (lease free or ended), which every
// process races for at once — the resumption of an instance a paused or
// killed runner, a failed record, or a cancelled run left. A share of the
// runs (Options["cancel"]) is cancelled at a random point, as a caller
// that gives up, which releases the instance mid-step or
// mid-compensation for the recovery runs to take over. The lease TTL is
// the run's TTL, so pauses (1–3× TTL) and kills hand instances over.
//
// Unsafe (the negative control), the same definition runs on a store that
// claims every instance afresh and records nothing: no lease, no
// resumption, every process runs every step of every key it reaches.
//
// History: an operation per Run, kind "saga" for a key of the stream and
// "recover" for an instance found by Unfinished. OK: the saga is over,
// Ret sagaCompleted or sagaCompensated; Arg is the number of effect rows
// this run wrote (0 for a replay of a finished saga). Fail: another runner
// holds it (ErrInProgress), nothing was run. Unknown: anything else — a
// lost lease, a failed record, a cancellation, an unfinished compensation.
//
// The checker reads the effect rows and each key's stored status, and
// reports, per key:
//   - concurrent-step: two executions of different runs whose intervals
//     overlap — two runners in the instance at once (the lease's promise,
//     for steps that honour their context);
//   - duplicate-step, duplicate-compensation: an execution that the
//     package promises not to repeat — an action run twice as the same
//     Attempt (two runs both marked it started from the same record), an
//     action or compensation run again after an earlier run of it went on
//     to a later step (which that run records first), or any execution
//     that started after a run had returned the saga's final outcome. An
//     execution repeated after a run that stopped before recording it is
//     the at-least-once allowance, counted in the notes;
//   - missing-compensation: a compensated saga with an executed action
//     whose step was never compensated;
//   - missing-step: a completed saga with a step never executed;
//   - compensated-and-completed: runs or the stored record disagree on
//     the outcome, or a completed saga has compensations;
//   - lost-outcome: a run returned the outcome, the stored instance is not
//     finished.
//
// Options (env.Options; keys other than these are left to other
// workloads):
//   - sql_mode, interpolateParams, clientFoundRows (MySQL): the clients'
//     session settings (see mysqlOptions), e.g. sql_mode
//     "SIMULTANEOUS_ASSIGNMENT", under which sagamysql's claim once let
//     two runners claim one saga; setup checks that the server took the
//     modes.
//   - fail: the share of keys whose saga fails (at step 2 or 3, half
//     each), 0 to 1; default sagaDefaultFail.
//   - long: the share of step executions that take 1–2× the TTL, 0 to 1;
//     default sagaDefaultLong.
//   - cancel: the share of runs given a random cancellation point, 0 to
//     1; default sagaDefaultCancel.
//   - conns: the connections of each client process's pool, 1 to 100;
//     default 1 or 2 (see sagaConns).
//
// Storage: the run's schema (PostgreSQL) or database (MariaDB/MySQL, so
// the DSN's user needs CREATE and DROP) holds the toolkit migration's
// sagas table and the effects.
type sagaWorkload struct{}

var _ workload = sagaWorkload{}

// Settings of the saga workload.
const (
	// sagaSteps is the number of steps of the definition.
	sagaSteps = 3
	// sagaDefaultFail, sagaDefaultLong and sagaDefaultCancel are the
	// defaults of the options of those names. Half the sagas compensate:
	// a compensation resumed by several recovery runs at once is where
	// sagamysql's claim once let two runners in.
	sagaDefaultFail   = 0.5
	sagaDefaultLong   = 0.2
	sagaDefaultCancel = 0.15
	// sagaShortMin and sagaShortMax bound a short step execution.
	sagaShortMin = 20 * time.Millisecond
	sagaShortMax = 100 * time.Millisecond
	// sagaRecoverBatch is how many unfinished instances a process resumes
	// before its next key.
	sagaRecoverBatch = 3
	// sagaOverslept is how much longer than planned a step may sleep
	// before it treats itself as paused (see sagaClient.execute).
	sagaOverslept = 10 * time.Millisecond
	// sagaSettle is how long a step that overslept waits for its context
	// to end before it trusts it.
	sagaSettle = 20 * time.Millisecond
	// sagaRetryBudget is the steps' retry budget (retry.Policy.MaxElapsed).
	sagaRetryBudget = 10 * time.Second
)

// The outcomes of a finished saga, in Op.Ret.
const (
	sagaCompleted   = 1
	sagaCompensated = 2
)

// The kinds of step execution, in the effects table.
const (
	sagaAction       = "action"
	sagaCompensation = "compensation"
)

// sagaOutcomeNames names the outcomes in reports.
var sagaOutcomeNames = map[int64]string{sagaCompleted: "completed", sagaCompensated: "compensated"}

// Errors of the saga workload's runs.
var (
	// errSagaStepFails is the permanent error of the action that fails its
	// saga by design.
	errSagaStepFails = errors.New("chaos: this step fails by design")
	// errSagaCancelled is the cause of a run cancelled at its random
	// point.
	errSagaCancelled = errors.New("chaos: run cancelled by its client")
	// errSagaTooLong is the cause of a run that passed sagaRunBound.
	errSagaTooLong = errors.New("chaos: run took too long")
)

// sagaOptions are the workload's parsed Options.
type sagaOptions struct {
	mysql              mysqlOptions
	fail, long, cancel float64
	conns              int // 0: sagaConns's default
}

// parseSagaOptions reads the options the workload honours (see
// sagaWorkload). A bad value is an error matching ErrInvalidConfig.
func parseSagaOptions(m map[string]string) (sagaOptions, error) {
	o := sagaOptions{fail: sagaDefaultFail, long: sagaDefaultLong, cancel: sagaDefaultCancel}
	for _, p := range []struct {
		key string
		dst *float64
	}{{"fail", &o.fail}, {"long", &o.long}, {"cancel", &o.cancel}} {
		v, ok := m[p.key]
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < 0 || x > 1 {
			return o, fmt.Errorf("%w: saga option %s=%q: want a share from 0 to 1", ErrInvalidConfig, p.key, v)
		}
		*p.dst = x
	}
	if v, ok := m["conns"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return o, fmt.Errorf("%w: saga option conns=%q: want 1 to 100", ErrInvalidConfig, v)
		}
		o.conns = n
	}
	var err error
	o.mysql, err = parseMySQLOptions(m)
	return o, err
}

// sagaKey names the n-th key of the stream.
func sagaKey(n int) string { return "s" + strconv.Itoa(n) }

// sagaFailingStep returns the step at which key's saga fails (2 or 3), or
// 0 for a saga that completes: a share fail of the keys, by a hash of the
// key, so that every process, and the checker, agree.
func sagaFailingStep(key string, fail float64) int {
	h := sha256.Sum256([]byte(key)) // FNV's high bits barely move between "s1" and "s2"
	u := float64(binary.BigEndian.Uint64(h[:])>>11) / (1 << 53)
	switch {
	case u < fail/2:
		return 2
	case u < fail:
		return 3
	}
	return 0
}

// sagaInput is the saga's input: the step that fails, if any. It is the
// same for every run of a key, as Run requires.
type sagaInput struct {
	// Fail is the step whose action fails (sagaFailingStep), 0 for none.
	Fail int `json:"fail,omitempty"`
}

// sagaStepName names step i (1-based).
func sagaStepName(i int) string { return "s" + strconv.Itoa(i) }

// systems: the backend's database holds both the sagas and the effects.
func (sagaWorkload) systems(backend string) ([]string, error) {
	switch backend {
	case "postgres", "mysql":
		return []string{backend}, nil
	}
	return nil, fmt.Errorf("saga backend %q (want postgres or mysql)", backend)
}

// Statements of the PostgreSQL side; %[1]s is the run's schema (an
// identifier made by resolve, never input).
const (
	sagaPGCreate = `CREATE TABLE %[1]s.saga_effects (saga_key text NOT NULL, step int NOT NULL, kind text NOT NULL,
	process int NOT NULL, run bigint NOT NULL, attempt int NOT NULL, started bigint NOT NULL, ended bigint NOT NULL,
	PRIMARY KEY (saga_key, step, kind, process, run))`
	// sagaPGInsert is idempotent within a run: a step retried after an
	// insert whose answer was lost writes nothing more.
	sagaPGInsert = `INSERT INTO %[1]s.saga_effects (saga_key, step, kind, process, run, attempt, started, ended)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`
	sagaPGSelect = `SELECT saga_key, step, kind, process, run, attempt, started, ended FROM %[1]s.saga_effects`
)

// Statements of the MySQL side; %[1]s is the run's database.
const (
	sagaMySQLCreate = "CREATE TABLE `%[1]s`.saga_effects (saga_key VARBINARY(255) NOT NULL, step INT NOT NULL, kind VARCHAR(16) NOT NULL, " +
		"process INT NOT NULL, run BIGINT NOT NULL, attempt INT NOT NULL, started BIGINT NOT NULL, ended BIGINT NOT NULL, " +
		"PRIMARY KEY (saga_key, step, kind, process, run)) ENGINE=InnoDB"
	// sagaMySQLInsert is idempotent within a run, as sagaPGInsert; the
	// no-op assignment does not depend on the sql_mode.
	sagaMySQLInsert = "INSERT INTO `%[1]s`.saga_effects (saga_key, step, kind, process, run, attempt, started, ended) " +
		"VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE run = run"
	sagaMySQLSelect = "SELECT saga_key, step, kind, process, run, attempt, started, ended FROM `%[1]s`.saga_effects"
	sagaMySQLModes  = "SELECT @@SESSION.sql_mode"
)

// sagaMigration is the toolkit migration of the sagas table, run in the
// run's schema or database so that the table is the one the stores are
// built for.
const sagaMigration = "0004_saga.up.sql"

// setup creates the sagas table and the effects table. Bad options fail
// here, before any client starts, and so does a sql_mode the server did
// not take.
func (sagaWorkload) setup(ctx context.Context, e *env) error {
	o, err := parseSagaOptions(e.Options)
	if err != nil {
		return err
	}
	switch e.Backend {
	case "postgres":
		return createScope(ctx, e, "postgres", []string{sagaMigration}, sagaPGCreate)
	case "mysql":
		if err := createScope(ctx, e, "mysql", []string{sagaMigration}, sagaMySQLCreate); err != nil {
			return err
		}
		db, err := openMySQL(e.Endpoints.MySQL, e.Run, opTimeout(e.TTL), o.mysql)
		if err != nil {
			return err
		}
		defer db.Close()
		var modes string
		if err := db.QueryRowContext(ctx, sagaMySQLModes).Scan(&modes); err != nil {
			return fmt.Errorf("chaos: read sql_mode: %w", err)
		}
		for _, m := range o.mysql.sqlModes {
			if !slices.Contains(strings.Split(modes, ","), m) {
				return fmt.Errorf("%w: saga option sql_mode: the server's session sql_mode %q lacks %s", ErrInvalidConfig, modes, m)
			}
		}
		return nil
	}
	return fmt.Errorf("chaos: saga backend %q", e.Backend)
}

// teardown drops the run's schema (PostgreSQL) or database (MySQL).
func (sagaWorkload) teardown(ctx context.Context, e *env) error {
	return dropScope(ctx, e, e.Backend)
}

// sagaStore is what the workload uses of a saga store: saga.Store, and
// the reads of recovery and of the checker.
type sagaStore interface {
	saga.Store
	// Load reads instance key (saga.ErrNotFound if none).
	Load(ctx context.Context, key string) (*saga.Record, error)
	// Unfinished lists the instances a recovery job would resume at now.
	Unfinished(ctx context.Context, now time.Time, limit int) ([]*saga.Record, error)
}

var (
	_ sagaStore  = (*sagapg.Store)(nil)
	_ sagaStore  = (*sagamysql.Store)(nil)
	_ saga.Store = sagaUnleased{}
)

// sagaEffects writes and reads the effect rows.
type sagaEffects interface {
	// write runs one step execution as a transaction on the process's
	// handle: it begins, calls work (the execution, which returns its row,
	// or an error that aborts), inserts the row (a no-op if its run wrote
	// it already) and commits.
	write(ctx context.Context, work func() (sagaEffect, error)) error
	// all reads every row.
	all(ctx context.Context) ([]sagaEffect, error)
}

// sagaPGEffects keeps the effect rows in PostgreSQL.
type sagaPGEffects struct {
	db  *pgxpool.Pool
	run string
}

// write runs work in a pgx transaction (pgx.BeginFunc: a failed COMMIT
// is returned, and may have committed).
func (s sagaPGEffects) write(ctx context.Context, work func() (sagaEffect, error)) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		r, err := work()
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, fmt.Sprintf(sagaPGInsert, s.run), r.Key, r.Step, r.Kind, r.Process, r.Run, r.Attempt, r.Start, r.End)
		return err
	})
}

// all reads the rows in no particular order.
func (s sagaPGEffects) all(ctx context.Context) ([]sagaEffect, error) {
	rows, err := s.db.Query(ctx, fmt.Sprintf(sagaPGSelect, s.run))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[sagaEffect])
}

// sagaMySQLEffects keeps the effect rows in MariaDB/MySQL.
type sagaMySQLEffects struct {
	db  *sql.DB
	run string
}

// write runs work in a database/sql transaction; COMMIT has no context
// in the driver, the I/O timeouts bound it.
func (s sagaMySQLEffects) write(ctx context.Context, work func() (sagaEffect, error)) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	r, err := work()
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(sagaMySQLInsert, s.run), r.Key, r.Step, r.Kind, r.Process, r.Run, r.Attempt, r.Start, r.End); err != nil {
		return err
	}
	return tx.Commit()
}

// all reads the rows in no particular order.
func (s sagaMySQLEffects) all(ctx context.Context) ([]sagaEffect, error) {
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(sagaMySQLSelect, s.run))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sagaEffect
	for rows.Next() {
		var r sagaEffect
		if err := rows.Scan(&r.Key, &r.Step, &r.Kind, &r.Process, &r.Run, &r.Attempt, &r.Start, &r.End); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// sagaConns is the size of process's pool: o.conns, or by default 1 for
// odd processes and 2 for even ones. With one connection, a step's
// transaction holds it and the runner cannot extend its lease until the
// step ends: a step that outlasts the lease must be ended by it in time
// (the saga heartbeat once checked the lease only after an extension
// returned, and let such a step run on into the next runner's). With two,
// the heartbeat extends the lease and long steps finish.
func sagaConns(o sagaOptions, process int) int {
	if o.conns > 0 {
		return o.conns
	}
	return 1 + (process+1)%2
}

// openSaga opens the store and the effects of e's backend on a pool of
// conns connections (0: the driver's default), and a function that closes
// what it opened; o's session settings apply on MySQL.
func openSaga(ctx context.Context, e *env, o sagaOptions, conns int) (sagaStore, sagaEffects, func(), error) {
	table := saga.Table{Schema: e.Run}
	switch e.Backend {
	case "postgres":
		cfg, err := pgxpool.ParseConfig(e.Endpoints.Postgres)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("chaos: postgres: %w", err)
		}
		if conns > 0 {
			cfg.MaxConns = int32(conns)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("chaos: postgres: %w", err)
		}
		st, err := sagapg.New(pool, &sagapg.Config{Table: table})
		if err != nil {
			pool.Close()
			return nil, nil, nil, err
		}
		return st, sagaPGEffects{pool, e.Run}, pool.Close, nil
	case "mysql":
		db, err := openMySQL(e.Endpoints.MySQL, e.Run, opTimeout(e.TTL), o.mysql)
		if err != nil {
			return nil, nil, nil, err
		}
		db.SetMaxOpenConns(conns) // 0: no limit, the driver's default
		st, err := sagamysql.New(db, &sagamysql.Config{Table: table})
		if err != nil {
			_ = db.Close()
			return nil, nil, nil, err
		}
		return st, sagaMySQLEffects{db, e.Run}, func() { _ = db.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("chaos: saga backend %q", e.Backend)
}

// sagaUnleased is the negative control's store: every Claim claims a
// fresh instance and every record succeeds without being kept, so that
// every Run runs every step — the saga without its claim and lease.
type sagaUnleased struct{}

// Claim returns a copy of fresh, claimed.
func (sagaUnleased) Claim(_ context.Context, fresh *saga.Record, _ time.Time) (*saga.Record, bool, error) {
	rec := *fresh
	rec.Steps = slices.Clone(fresh.Steps)
	return &rec, true, nil
}

// Save keeps nothing.
func (sagaUnleased) Save(context.Context, *saga.Record) error { return nil }

// Extend keeps nothing.
func (sagaUnleased) Extend(context.Context, string, int64, time.Time) error { return nil }

// sagaRun is what a run's steps need to know about it, carried in the
// context Run gives them (Call has no room for it).
type sagaRun struct {
	process int   // the client process running it
	seq     int64 // the Seq of the run's operation
	effects int64 // effect rows written so far
}

// sagaRunKey is the context key of a *sagaRun.
type sagaRunKey struct{}

// sagaClient is a client process's saga loop.
type sagaClient struct {
	c       *client
	o       sagaOptions
	def     *saga.Definition[sagaInput]
	store   saga.Store // the backend's, or sagaUnleased in the negative control
	effects sagaEffects
}

// client runs recovery and the stream of keys until ctx ends.
func (sagaWorkload) client(ctx context.Context, c *client) error {
	o, err := parseSagaOptions(c.Options)
	if err != nil {
		return err
	}
	st, effects, closeStore, err := openSaga(ctx, &c.env, o, sagaConns(o, c.process))
	if err != nil {
		return err
	}
	defer closeStore()
	w := &sagaClient{c: c, o: o, store: st, effects: effects}
	if c.Unsafe {
		w.store = sagaUnleased{}
	}
	steps := make([]saga.Step[sagaInput], sagaSteps)
	for i := range steps {
		steps[i] = w.step(i + 1)
	}
	// Retries outlast any fault, so that a step whose commit got no answer
	// is retried (writing nothing more) rather than failed with its
	// effect committed, which would break the contract that a failing
	// action had no effect; the end of the lease still stops them.
	policy := retry.Policy{MaxElapsed: sagaRetryBudget}
	if w.def, err = saga.New("chaos", 1, &saga.Config{LeaseTTL: c.TTL, Retry: policy}, steps...); err != nil {
		return err
	}
	for n := 1; ctx.Err() == nil; n++ {
		if !c.Unsafe {
			w.recover(ctx, st)
		}
		w.run(ctx, "saga", sagaKey(n))
	}
	return nil
}

// pause waits a little after a run that ended Unknown: while the network
// fails, runs fail within milliseconds, and a process that went straight
// on would skip through the stream, leaving keys nobody runs.
func (w *sagaClient) pause(ctx context.Context) { _ = sleepCtx(ctx, w.c.TTL/6) }

// recover resumes the instances a recovery job would find now. A failed
// listing is skipped: the next iteration lists again.
func (w *sagaClient) recover(ctx context.Context, st sagaStore) {
	lctx, cancel := context.WithTimeout(ctx, opTimeout(w.c.TTL))
	recs, err := st.Unfinished(lctx, time.Now(), sagaRecoverBatch)
	cancel()
	if err != nil {
		return
	}
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		w.run(ctx, "recover", rec.Key)
	}
}

// sagaRunBound bounds one Run: a step's retry budget, and six long
// executions with their records and room for faults.
func sagaRunBound(ttl time.Duration) time.Duration { return 20*ttl + sagaRetryBudget }

// run runs key's saga once and records it as an operation of kind.
func (w *sagaClient) run(ctx context.Context, kind, key string) {
	c := w.c
	op := c.invoke(Op{Kind: kind, Key: key})
	r := &sagaRun{process: c.process, seq: op.Seq}
	rctx, cancel := context.WithTimeoutCause(ctx, sagaRunBound(c.TTL), errSagaTooLong)
	defer cancel()
	if c.rng.Float64() < w.o.cancel {
		// A caller that gives up at a random point: before the claim,
		// during a step or a compensation, or after the end.
		at := time.Duration(c.rng.Int64N(int64(3 * c.TTL)))
		var stop context.CancelFunc
		rctx, stop = context.WithTimeoutCause(rctx, at, errSagaCancelled)
		defer stop()
	}
	_, err := w.def.Run(context.WithValue(rctx, sagaRunKey{}, r), w.store, key, sagaInput{Fail: sagaFailingStep(key, w.o.fail)})
	op.Arg = r.effects
	switch {
	case err == nil:
		op.Ret = sagaCompleted
		c.complete(op, OK, nil)
	case errors.Is(err, saga.ErrCompensated):
		op.Ret = sagaCompensated
		c.complete(op, OK, nil)
	case errors.Is(err, saga.ErrInProgress):
		c.complete(op, Fail, err)
	default:
		if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		c.complete(op, Unknown, err)
		w.pause(ctx)
	}
}

// step returns step i of the definition: an action that fails by design
// when the input says so, and otherwise executes, and a compensation that
// executes.
func (w *sagaClient) step(i int) saga.Step[sagaInput] {
	return saga.NewStep(sagaStepName(i),
		func(ctx context.Context, call *saga.Call[sagaInput]) (int, error) {
			if call.Input.Fail == i {
				return 0, errSagaStepFails
			}
			return i, w.execute(ctx, call.SagaKey, i, sagaAction, call.Attempt)
		},
		func(ctx context.Context, call *saga.Call[sagaInput], _ int) error {
			return w.execute(ctx, call.SagaKey, i, sagaCompensation, call.Attempt)
		})
}

// execute is one step execution: a transaction on the process's handle
// that takes its time, then writes the effect row with the execution's
// start and end, unless the step's context ended first.
//
// The end is read before the context is checked, so a row is written only
// if the context was live after its end: the lease covered the whole
// interval, by the package's promise. A step that overslept (its process
// was paused, or starved) waits sagaSettle before it checks: after a
// SIGCONT the overdue timers — the sleep's, and the one by which the
// package ends the step at its lease's end — fire in no particular order,
// and the second must get to run before the step trusts its context.
func (w *sagaClient) execute(ctx context.Context, key string, step int, kind string, attempt int) error {
	r, _ := ctx.Value(sagaRunKey{}).(*sagaRun)
	if r == nil {
		return errors.New("chaos: a step ran outside a run of the workload")
	}
	d := sagaShortMin + time.Duration(w.c.rng.Int64N(int64(sagaShortMax-sagaShortMin)+1))
	if w.c.rng.Float64() < w.o.long {
		d = w.c.TTL + time.Duration(w.c.rng.Int64N(int64(w.c.TTL)+1))
	}
	err := w.effects.write(ctx, func() (sagaEffect, error) {
		start := time.Now()
		if err := sleepCtx(ctx, d); err != nil {
			return sagaEffect{}, err
		}
		end := time.Now()
		if end.Sub(start) > d+sagaOverslept {
			_ = sleepCtx(ctx, sagaSettle)
		}
		return sagaEffect{Key: key, Step: step, Kind: kind, Process: r.process, Run: r.seq,
			Attempt: attempt, Start: start.UnixNano(), End: end.UnixNano()}, ctx.Err()
	})
	if err != nil {
		if ctx.Err() != nil {
			return err // interrupted: the step stays Running and runs again
		}
		// The commit may have happened: retried in this run, the step
		// writes nothing more.
		return saga.Retryable(err)
	}
	r.effects++
	return nil
}

// check reads the effect rows and every key's stored status, and judges
// the history against them.
func (sagaWorkload) check(ctx context.Context, e *env, ops []Op) (*Report, error) {
	st, effects, closeStore, err := openSaga(ctx, e, sagaOptions{}, 0) // the checker's reads need no session settings
	if err != nil {
		return nil, err
	}
	defer closeStore()
	rows, err := effects.all(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: read saga effects: %w", err)
	}
	var status map[string]saga.Status
	if !e.Unsafe {
		status = map[string]saga.Status{}
		for _, key := range sagaKeys(ops, rows) {
			rec, err := st.Load(ctx, key)
			switch {
			case errors.Is(err, saga.ErrNotFound):
			case err != nil:
				return nil, fmt.Errorf("chaos: read saga %s: %w", key, err)
			default:
				status[key] = rec.Status
			}
		}
	}
	return checkSaga(ops, rows, status), nil
}

// sagaKeys lists the keys of a history's runs and of the effect rows.
func sagaKeys(ops []Op, effects []sagaEffect) []string {
	keys := map[string]bool{}
	for _, op := range ops {
		if op.Kind == "saga" || op.Kind == "recover" {
			keys[op.Key] = true
		}
	}
	for _, e := range effects {
		keys[e.Key] = true
	}
	return slices.Sorted(maps.Keys(keys))
}

// sagaEffect is one step execution's effect row.
type sagaEffect struct {
	Key     string // the saga's key
	Step    int    // 1-based
	Kind    string // sagaAction or sagaCompensation
	Process int    // the client process that executed it
	Run     int64  // the Seq of the run's operation in its process's history
	Attempt int    // Call.Attempt
	// Start and End are the execution's wall-clock interval, Unix ns.
	Start, End int64
}

// runID identifies the run that executed e.
func (e sagaEffect) runID() [2]int64 { return [2]int64{int64(e.Process), e.Run} }

// position orders the executions of one saga as one run makes them:
// actions 1 to sagaSteps, then compensations from the last step down.
func (e sagaEffect) position() int {
	if e.Kind == sagaAction {
		return e.Step
	}
	return 2*sagaSteps + 1 - e.Step
}

// sagaClock formats the times of reports.
const sagaClock = "15:04:05.000"

// String names e for reports.
func (e sagaEffect) String() string {
	return fmt.Sprintf("%s %s by process %d run %d (attempt %d, %s–%s)", sagaStepName(e.Step), e.Kind, e.Process, e.Run, e.Attempt,
		time.Unix(0, e.Start).Format(sagaClock), time.Unix(0, e.End).Format(sagaClock))
}

// sagaTally is what the checker saw, for its notes.
type sagaTally struct {
	// keys counts the sagas; completed, compensated and unfinished those
	// in each stored status.
	keys, completed, compensated, unfinished int
	takeovers                                int            // keys executed by more than one process
	reruns                                   int            // executions repeated within the at-least-once allowance
	runs                                     map[string]int // runs by kind/outcome
	replays                                  int            // runs that found the saga finished
	ambiguous                                int            // runs Unknown or Pending
}

// checkSaga judges a saga history against the effect rows and the stored
// status of each key (nil for the negative control, which stores
// nothing); see sagaWorkload for the anomalies.
func checkSaga(ops []Op, effects []sagaEffect, status map[string]saga.Status) *Report {
	r := &Report{}
	t := sagaTally{runs: map[string]int{}}
	byKey := map[string][]sagaEffect{}
	for _, e := range effects {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	runsByKey := map[string][]Op{}
	for _, op := range ops {
		if op.Kind != "saga" && op.Kind != "recover" {
			continue
		}
		runsByKey[op.Key] = append(runsByKey[op.Key], op)
		t.runs[op.Kind+"/"+op.Outcome.String()]++
		switch {
		case op.Outcome == OK && op.Arg == 0:
			t.replays++
		case op.Outcome.Ambiguous():
			t.ambiguous++
		}
	}
	for _, key := range sagaKeys(ops, effects) {
		t.keys++
		effs := byKey[key]
		slices.SortStableFunc(effs, func(a, b sagaEffect) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End)) })
		sagaConcurrent(r, key, effs)
		finished := int64(math.MaxInt64)
		var finisher Op
		outcomes := map[int64]bool{}
		for _, op := range runsByKey[key] {
			if op.Outcome != OK {
				continue
			}
			outcomes[op.Ret] = true
			if op.Return < finished {
				finished, finisher = op.Return, op
			}
		}
		t.reruns += sagaDuplicates(r, key, effs, finished, finisher)
		procs := map[int]bool{}
		for _, e := range effs {
			procs[e.Process] = true
		}
		if len(procs) > 1 {
			t.takeovers++
		}
		st, stored := status[key]
		switch {
		case st == saga.Completed:
			t.completed++
		case st == saga.Compensated:
			t.compensated++
		case stored:
			t.unfinished++
		}
		sagaOutcome(r, key, effs, outcomes, st, status != nil)
	}
	if status == nil {
		r.note("negative control: no store, every run ran every step it reached")
	} else {
		r.note("%d sagas: %d completed, %d compensated, %d unfinished, %d never stored", t.keys, t.completed, t.compensated, t.unfinished,
			t.keys-t.completed-t.compensated-t.unfinished)
	}
	r.note("runs: %s; %d found the saga finished (replays), %d ambiguous", counts(t.runs), t.replays, t.ambiguous)
	r.note("%d step executions; %d keys executed by more than one process (takeovers); %d executions repeated after a run that stopped before recording them (at least once)",
		len(effects), t.takeovers, t.reruns)
	return r.finish()
}

// sagaConcurrent reports the executions of one key, sorted by start, that
// overlap another run's.
func sagaConcurrent(r *Report, key string, effs []sagaEffect) {
	for i, a := range effs {
		for _, b := range effs[i+1:] {
			if b.Start >= a.End {
				break // sorted by start: no later one overlaps a either
			}
			if a.runID() != b.runID() {
				r.add("concurrent-step", "key %q: %s and %s overlap by %s", key, a, b, time.Duration(min(a.End, b.End)-b.Start).Round(time.Millisecond))
			}
		}
	}
}

// sagaDuplicates reports the executions of one key, sorted by start, that
// the package promises not to repeat, and returns how many were repeated
// within its at-least-once allowance. finished is when the first run that
// returned the outcome (finisher) returned.
func sagaDuplicates(r *Report, key string, effs []sagaEffect, finished int64, finisher Op) int {
	last := map[[2]int64]int{} // the furthest position each run reached
	for _, e := range effs {
		last[e.runID()] = max(last[e.runID()], e.position())
	}
	reruns := 0
	for i, b := range effs {
		kind := "duplicate-step"
		if b.Kind == sagaCompensation {
			kind = "duplicate-compensation"
		}
		if b.Start > finished {
			r.add(kind, "key %q: %s started %s after process %d's run %d had returned the saga %s",
				key, b, time.Duration(b.Start-finished).Round(time.Millisecond), finisher.Process, finisher.Seq, sagaOutcomeNames[finisher.Ret])
			continue
		}
		repeated, reported := false, false
		for _, a := range effs[:i] {
			if a.Step != b.Step || a.Kind != b.Kind || a.runID() == b.runID() {
				continue
			}
			repeated = true
			switch {
			case b.Kind == sagaAction && a.Attempt == b.Attempt:
				r.add(kind, "key %q: %s and %s: two runs executed the same attempt", key, a, b)
			case last[a.runID()] > a.position():
				r.add(kind, "key %q: %s after %s, whose run went on past it (so it had recorded it)", key, b, a)
			default:
				continue
			}
			reported = true
			break
		}
		if repeated && !reported {
			reruns++
		}
	}
	return reruns
}

// sagaOutcome reports what the outcome of one key's saga — told by its
// runs (outcomes, by Op.Ret) and by its stored status st, when the store
// keeps one (stored) — contradicts in the effect rows.
func sagaOutcome(r *Report, key string, effs []sagaEffect, outcomes map[int64]bool, st saga.Status, stored bool) {
	var actions, comps [sagaSteps + 1]int
	for _, e := range effs {
		if e.Kind == sagaAction {
			actions[e.Step]++
		} else {
			comps[e.Step]++
		}
	}
	completed := outcomes[sagaCompleted] || st == saga.Completed
	compensated := outcomes[sagaCompensated] || st == saga.Compensated
	if stored && len(outcomes) > 0 && !st.Finished() {
		r.add("lost-outcome", "key %q: runs returned %s, the stored status is %q", key, sagaOutcomesText(outcomes), st)
	}
	if completed && compensated {
		r.add("compensated-and-completed", "key %q: runs returned %s, the stored status is %q", key, sagaOutcomesText(outcomes), st)
		return // which steps should have been compensated is moot
	}
	for s := 1; s <= sagaSteps; s++ {
		switch {
		case completed && comps[s] > 0:
			r.add("compensated-and-completed", "key %q: the saga completed, and step s%d was compensated %d times", key, s, comps[s])
		case completed && actions[s] == 0:
			r.add("missing-step", "key %q: the saga completed, and step s%d never executed", key, s)
		case compensated && actions[s] > 0 && comps[s] == 0:
			r.add("missing-compensation", "key %q: the saga was compensated, and step s%d executed %d times without compensation", key, s, actions[s])
		}
	}
}

// sagaOutcomesText lists the outcomes runs returned.
func sagaOutcomesText(outcomes map[int64]bool) string {
	var names []string
	for _, o := range slices.Sorted(maps.Keys(outcomes)) {
		names = append(names, sagaOutcomeNames[o])
	}
	if len(names) == 0 {
		return "no outcome"
	}
	return strings.Join(names, " and ")
}
