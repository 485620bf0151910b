package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticdynamo"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertdynamo"
	"github.com/concurkit/concurkit/upsert/upsertmysql"
	"github.com/concurkit/concurkit/upsert/upsertpg"
)

// registerWorkload is the register workload: a few registers (the rows
// "k0", "k1", … of a table named after the run, each a value and a
// version, all 0 at setup), on which every client loops doing random
// reads, blind writes and compare-and-swaps, each on a random key. The
// checker reads every register's final value as a last read and asks
// porcupine whether each register's history is linearizable.
//
// The compare-and-swap is the project's own optimistic concurrency
// control, not a native UPDATE … WHERE value = expected: read the value
// and version, then optimisticpg/optimisticmysql/optimisticdynamo.Update
// of the value where the version is still the one read. The read is
// recorded as a read operation of its own, and the cas operation
// (Expect = the value read, Arg = the new value) is invoked once it
// returned, so that a cas interval holds only the version-checked write.
// Every write bumps the version, and every value is written once
// (process·10⁹ + a per-process counter), so the version moved exactly
// when the value did: a successful cas is CAS(Expect → Arg) at the
// moment of the update, and a cas refused with optimistic.ErrConflict is
// an observation that the value was not Expect at that moment, which the
// checker uses. Unsafe (the negative control) the cas writes without
// checking the version, so concurrent cas lose updates.
//
// On PostgreSQL and MySQL/MariaDB, writes and cas run in a transaction
// of pessimisticpg/pessimisticmysql.InTx at Options["isolation"], never
// retried: before COMMIT nothing can have committed, so only a COMMIT
// without an answer (*concurkit.AmbiguousCommitError) is Unknown, and
// any other failure is Fail. Reads are single autocommit statements. On
// DynamoDB (consistent reads, single-item writes) a write is Fail only
// when the service answered that the client was at fault (a failed
// condition, validation, throttling), Unknown otherwise; the SDK's own
// retries are off, since a retried cas that had applied would come back
// as a conflict. A Fail that is not a refusal observed nothing and is
// left out of the check; Unknown and Pending writes and cas may take
// effect at any time after their invocation, or never.
//
// Options (env.Options; keys other than these are left to other
// workloads):
//   - keys: the number of registers, 1–1000 (default 3).
//   - isolation: "read-committed", "repeatable-read" or "serializable",
//     the level of the write and cas transactions (PostgreSQL, MySQL);
//     default the server's. Under PostgreSQL repeatable-read a changed
//     row fails the cas (and the blind write) with a serialization error
//     rather than a version miss, so there are no refusals, and the
//     unsafe run loses no update.
//   - sql_mode (MySQL): modes added to the session's sql_mode on every
//     connection, comma-separated (e.g. "SIMULTANEOUS_ASSIGNMENT").
//   - interpolateParams, clientFoundRows (MySQL): "true" or "false", the
//     driver options of that name; default the DSN's.
//   - sdk_retries (DynamoDB): "true" restores the SDK's default retries,
//     to see what they do to ambiguous writes.
//   - check_timeout: a time.ParseDuration bound on the linearizability
//     check (default 30s; "0" means none). A key whose check times out is
//     reported as anomaly "unchecked": nothing passes unverified.
//   - out: a directory; when a key is not linearizable, porcupine's
//     visualisation of it is written there as register-<key>.html.
//
// The MySQL DSN names the database to use or none; with none, setup
// creates the database concurkit_chaos (and leaves it, as other runs may
// use it: teardown drops only the run's table).
type registerWorkload struct{}

var _ workload = registerWorkload{}

// Settings of the register workload.
const (
	registerDefaultKeys         = 3
	registerMaxKeys             = 1000
	registerDefaultCheckTimeout = 30 * time.Second
	// registerSpan separates the values of processes: process p writes
	// p·registerSpan + 1, + 2, …, so that every value is written once.
	registerSpan = 1_000_000_000
	// registerDatabase is the MySQL database used when the DSN names none.
	registerDatabase = "concurkit_chaos"
)

// registerRunName is what a run name must look like to name a table in
// each backend (an identifier; DynamoDB wants 3 characters or more).
var registerRunName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{2,62}$`)

// registerRefused is the Err of a cas refused by its version check. The
// checker keeps such a cas (it observed that the value was not Expect)
// and leaves out every other failure, which observed nothing.
var registerRefused = optimistic.ErrConflict.Error()

// registerOptions are the register workload's settings, from env.Options.
type registerOptions struct {
	keys         int
	isolation    sql.IsolationLevel
	mysql        mysqlOptions
	sdkRetries   bool
	checkTimeout time.Duration
	out          string
}

// parseRegisterOptions reads the options the workload honours (see
// registerWorkload). A bad value is an error matching ErrInvalidConfig.
func parseRegisterOptions(m map[string]string) (registerOptions, error) {
	o := registerOptions{keys: registerDefaultKeys, checkTimeout: registerDefaultCheckTimeout, out: m["out"]}
	bad := func(key, why string) error {
		return fmt.Errorf("%w: register option %s=%q: %s", ErrInvalidConfig, key, m[key], why)
	}
	if v, ok := m["keys"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > registerMaxKeys {
			return o, bad("keys", fmt.Sprintf("want 1 to %d", registerMaxKeys))
		}
		o.keys = n
	}
	switch m["isolation"] {
	case "":
	case "read-committed":
		o.isolation = sql.LevelReadCommitted
	case "repeatable-read":
		o.isolation = sql.LevelRepeatableRead
	case "serializable":
		o.isolation = sql.LevelSerializable
	default:
		return o, bad("isolation", "want read-committed, repeatable-read or serializable")
	}
	var err error
	if o.mysql, err = parseMySQLOptions(m); err != nil {
		return o, err
	}
	if v, ok := m["sdk_retries"]; ok {
		x, err := strconv.ParseBool(v)
		if err != nil {
			return o, bad("sdk_retries", "want true or false")
		}
		o.sdkRetries = x
	}
	if v, ok := m["check_timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return o, bad("check_timeout", "want a duration such as 30s")
		}
		o.checkTimeout = d
	}
	return o, nil
}

// registerKey names register i.
func registerKey(i int) string { return "k" + strconv.Itoa(i) }

func (registerWorkload) systems(backend string) ([]string, error) {
	switch backend {
	case "postgres", "mysql", "dynamodb":
		return []string{backend}, nil
	}
	return nil, fmt.Errorf("register backend %q (want postgres, mysql or dynamodb)", backend)
}

// setup creates the run's table with every register at 0. Bad options
// fail here, before any client starts.
func (registerWorkload) setup(ctx context.Context, e *env) error {
	o, err := parseRegisterOptions(e.Options)
	if err != nil {
		return err
	}
	st, err := openRegister(ctx, e, o)
	if err != nil {
		return err
	}
	defer st.close()
	if err := st.create(ctx, o.keys); err != nil {
		return fmt.Errorf("chaos: create registers: %w", err)
	}
	return nil
}

func (registerWorkload) teardown(ctx context.Context, e *env) error {
	o, err := parseRegisterOptions(e.Options)
	if err != nil {
		return err
	}
	st, err := openRegister(ctx, e, o)
	if err != nil {
		return err
	}
	defer st.close()
	return st.drop(ctx)
}

func (registerWorkload) client(ctx context.Context, c *client) error {
	o, err := parseRegisterOptions(c.Options)
	if err != nil {
		return err
	}
	st, err := openRegister(ctx, &c.env, o)
	if err != nil {
		return err
	}
	defer st.close()
	timeout := opTimeout(c.TTL)
	var n int64 // values written so far
	for ctx.Err() == nil {
		key := registerKey(c.rng.IntN(o.keys))
		// The operation runs to its own deadline even when the run ends
		// meanwhile: cut short, it would end ambiguous for no reason.
		// The deadline is what keeps a frozen server from holding the
		// client forever; the pools replace broken connections.
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		switch c.rng.IntN(4) {
		case 0:
			registerRead(octx, c, st, key)
		case 1:
			n++
			registerWrite(octx, c, st, key, int64(c.process)*registerSpan+n)
		default:
			n++
			registerCAS(octx, c, st, key, int64(c.process)*registerSpan+n)
		}
		cancel()
	}
	return nil
}

// registerRead records a read. A failed read changed nothing and
// observed nothing: Fail.
func registerRead(ctx context.Context, c *client, st registerStore, key string) {
	op := c.invoke(Op{Kind: "read", Key: key})
	v, err := st.read(ctx, key)
	if err != nil {
		c.complete(op, Fail, err)
		return
	}
	op.Ret = v
	c.complete(op, OK, nil)
}

func registerWrite(ctx context.Context, c *client, st registerStore, key string, v int64) {
	op := c.invoke(Op{Kind: "write", Key: key, Arg: v})
	o, err := registerOutcome(st, st.write(ctx, key, v))
	c.complete(op, o, err)
}

// registerCAS records the cas's read as a read, then the version-checked
// write as a cas expecting the value read.
func registerCAS(ctx context.Context, c *client, st registerStore, key string, next int64) {
	read := c.invoke(Op{Kind: "read", Key: key})
	var op Op
	invoked := false
	err := st.cas(ctx, key, c.Unsafe, func(v int64) int64 {
		read.Ret = v
		c.complete(read, OK, nil)
		op = c.invoke(Op{Kind: "cas", Key: key, Expect: v, Arg: next})
		invoked = true
		return next
	})
	if !invoked {
		c.complete(read, Fail, err)
		return
	}
	o, err := registerOutcome(st, err)
	c.complete(op, o, err)
}

// registerOutcome classifies the error of a write or cas.
func registerOutcome(st registerStore, err error) (Outcome, error) {
	switch {
	case err == nil:
		return OK, nil
	case errors.Is(err, optimistic.ErrConflict):
		// Recorded as the bare sentinel: the checker reads it as
		// "the value was not Expect".
		return Fail, optimistic.ErrConflict
	case st.ambiguous(err):
		return Unknown, err
	}
	return Fail, err
}

// check reads every register's final value (a last read, after every
// client stopped) and checks each register's history for
// linearizability.
func (registerWorkload) check(ctx context.Context, e *env, ops []Op) (*Report, error) {
	o, err := parseRegisterOptions(e.Options)
	if err != nil {
		return nil, err
	}
	st, err := openRegister(ctx, e, o)
	if err != nil {
		return nil, err
	}
	defer st.close()
	// A lost acknowledged write shows in the final value even when no
	// client read the register after it.
	ops = slices.Clip(ops) // append below must not write into the caller's array
	for i := range o.keys {
		key := registerKey(i)
		call := time.Now().UnixNano()
		v, err := st.read(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("chaos: read final value of %s: %w", key, err)
		}
		ops = append(ops, Op{Kind: "read", Key: key, Ret: v, Call: call, Return: time.Now().UnixNano(), Outcome: OK})
	}
	timeout := o.checkTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); timeout == 0 || left < timeout {
			timeout = max(left, time.Nanosecond) // 0 would mean no limit
		}
	}
	r := checkRegister(ops, timeout, o.out)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// regInput is a register operation as the model sees it.
type regInput struct {
	key    string
	kind   string // "read", "write" or "cas"
	arg    int64  // written (write, cas)
	expect int64  // expected (cas)
}

// regResult is what the client learnt of an operation's effect.
type regResult uint8

const (
	regOK        regResult = iota // it took effect (a read: it read value)
	regRefused                    // a cas refused: the value was not expect
	regAmbiguous                  // it may or may not have taken effect
)

// regOutput is an operation's result as the model sees it.
type regOutput struct {
	result regResult
	value  int64 // read
}

// registerStep is the register's sequential specification, over one
// key, nondeterministic in one way: an ambiguous write or cas leads both
// to the state where it took effect and to the one where it did not.
// (Its Return is also pushed to the end of time, so it may take effect
// at any point after its invocation.)
func registerStep(state, input, output any) []any {
	s, in, out := state.(int64), input.(regInput), output.(regOutput)
	switch in.kind {
	case "read":
		if out.value == s {
			return []any{s}
		}
	case "write":
		if out.result == regAmbiguous {
			return []any{in.arg, s}
		}
		return []any{in.arg}
	case "cas":
		switch {
		case out.result == regRefused:
			if s != in.expect {
				return []any{s}
			}
		case s != in.expect:
			if out.result == regAmbiguous { // it met another value: no effect
				return []any{s}
			}
		case out.result == regAmbiguous:
			return []any{in.arg, s}
		default:
			return []any{in.arg}
		}
	}
	return nil
}

// registerModel is the porcupine model of a set of registers, all at 0
// initially, partitioned by key.
func registerModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			for _, op := range h {
				k := op.Input.(regInput).key
				byKey[k] = append(byKey[k], op)
			}
			var out [][]porcupine.Operation
			for _, k := range slices.Sorted(maps.Keys(byKey)) {
				out = append(out, byKey[k])
			}
			return out
		},
		Init:  func() []any { return []any{int64(0)} },
		Step:  registerStep,
		Equal: func(a, b any) bool { return a.(int64) == b.(int64) },
		Hash:  func(s any) uint64 { return uint64(s.(int64)) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(regInput), output.(regOutput)
			var s string
			switch in.kind {
			case "read":
				s = fmt.Sprintf("read() → %d", out.value)
			case "write":
				s = fmt.Sprintf("write(%d)", in.arg)
			default:
				s = fmt.Sprintf("cas(%d → %d)", in.expect, in.arg)
			}
			switch out.result {
			case regRefused:
				s += " refused"
			case regAmbiguous:
				s += " ?"
			}
			return s
		},
		DescribeState: func(s any) string { return strconv.FormatInt(s.(int64), 10) },
		DescribeOperationMetadata: func(m any) string {
			op, ok := m.(Op)
			if !ok {
				return ""
			}
			s := fmt.Sprintf("process %d, op %d, %s", op.Process, op.Seq, op.Outcome)
			if op.Err != "" {
				s += ": " + op.Err
			}
			return s
		},
	}
	return nm.ToModel()
}

// registerStats counts what registerOperations made of a history.
type registerStats struct {
	read, write, cas int // kept, by kind
	refused          int // cas refused by their check (kept)
	ambiguous        int // writes and cas Unknown or Pending (kept, either way)
	dropped          int // failed, or reads without an answer: no effect, no information
}

// registerOperations turns the register operations of ops into porcupine
// histories, one per key. A process's operations after an ambiguous one
// get a new client id: the ambiguous one stays open to the end of time
// and would overlap them in the visualisation.
func registerOperations(ops []Op) (map[string][]porcupine.Operation, registerStats) {
	var st registerStats
	hist := map[string][]porcupine.Operation{}
	type proc struct{ process, gen int }
	gen := map[int]int{}
	ids := map[string]map[proc]int{} // per key, dense from 0
	for _, op := range ops {
		if op.Kind != "read" && op.Kind != "write" && op.Kind != "cas" {
			continue
		}
		in := regInput{key: op.Key, kind: op.Kind, arg: op.Arg, expect: op.Expect}
		var out regOutput
		ret := op.Return
		switch {
		case op.Outcome == OK:
			out.value = op.Ret
		case op.Outcome.Ambiguous() && op.Kind != "read":
			out.result, ret = regAmbiguous, math.MaxInt64
			st.ambiguous++
		case op.Outcome == Fail && op.Kind == "cas" && op.Err == registerRefused:
			out.result = regRefused
			st.refused++
		default:
			st.dropped++
			continue
		}
		switch op.Kind {
		case "read":
			st.read++
		case "write":
			st.write++
		default:
			st.cas++
		}
		if ids[op.Key] == nil {
			ids[op.Key] = map[proc]int{}
		}
		cl := proc{op.Process, gen[op.Process]}
		id, ok := ids[op.Key][cl]
		if !ok {
			id = len(ids[op.Key])
			ids[op.Key][cl] = id
		}
		if out.result == regAmbiguous {
			gen[op.Process]++
		}
		hist[op.Key] = append(hist[op.Key], porcupine.Operation{
			ClientId: id, Input: in, Call: op.Call, Output: out, Return: ret, Metadata: op,
		})
	}
	return hist, st
}

// checkRegister checks each key's history for linearizability, the keys
// in parallel, each within timeout (0: no limit). A key that is not
// linearizable is anomaly "nonlinearizable", whose detail names the
// operation the search could not place (and, with out set, porcupine's
// visualisation of the key is written to out/register-<key>.html); a key
// whose check timed out is anomaly "unchecked".
func checkRegister(ops []Op, timeout time.Duration, out string) *Report {
	r := &Report{}
	hist, st := registerOperations(ops)
	keys := slices.Sorted(maps.Keys(hist))
	model := registerModel()
	results := make([]porcupine.CheckResult, len(keys))
	infos := make([]*porcupine.LinearizationInfo, len(keys))
	start := time.Now()
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			results[i] = porcupine.CheckOperationsTimeout(model, hist[k], timeout)
			if results[i] != porcupine.Illegal {
				return
			}
			// Only the verbose check keeps the partial linearizations a
			// detail and a visualisation need, and it can cost much more
			// where the search backtracks: run it on a failing key only.
			if res, info := porcupine.CheckOperationsVerbose(model, hist[k], timeout); res == porcupine.Illegal {
				infos[i] = &info
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	timedOut := false
	for i, k := range keys {
		switch results[i] {
		case porcupine.Illegal:
			var detail strings.Builder
			fmt.Fprintf(&detail, "key %s: its %d operations have no linearization", k, len(hist[k]))
			if info := infos[i]; info != nil {
				if n, op := registerStuck(model, hist[k], *info); op != "" {
					fmt.Fprintf(&detail, "; the longest partial one (%d operations) cannot go on with %s", n, op)
				}
				if out != "" {
					path := filepath.Join(out, "register-"+k+".html")
					if err := writeVisualisation(model, *info, path); err != nil {
						r.note("visualisation of key %s not written: %v", k, err)
					} else {
						fmt.Fprintf(&detail, "; see %s", path)
					}
				}
			}
			r.add("nonlinearizable", "%s", detail.String())
		case porcupine.Unknown:
			timedOut = true
			r.add("unchecked", "key %s: the check of its %d operations timed out after %s", k, len(hist[k]), timeout)
		}
	}
	if timedOut {
		r.note("linearizability check timed out")
	}
	r.note("%d register operations on %d keys: %d read, %d write, %d cas (%d refused by their check); %d ambiguous writes or cas (unknown or pending) taken either way; %d failed or unanswered, dropped",
		st.read+st.write+st.cas, len(keys), st.read, st.write, st.cas, st.refused, st.ambiguous, st.dropped)
	r.note("linearizability checked in %s", elapsed.Round(time.Millisecond))
	return r.finish()
}

// registerStuck returns the length of the longest partial linearization
// of the illegal history h (one key) and describes the operation, first
// by invocation, that it leaves out: where the search ran out of
// explanations.
func registerStuck(model porcupine.Model, h []porcupine.Operation, info porcupine.LinearizationInfo) (int, string) {
	parts := info.PartialLinearizations()
	if len(parts) != 1 {
		return 0, ""
	}
	var longest []int
	for _, p := range parts[0] {
		if len(p) > len(longest) {
			longest = p
		}
	}
	in := make([]bool, len(h))
	for _, id := range longest {
		in[id] = true
	}
	first := -1
	for i, op := range h {
		if !in[i] && (first < 0 || op.Call < h[first].Call) {
			first = i
		}
	}
	if first < 0 {
		return 0, ""
	}
	op := h[first]
	return len(longest), fmt.Sprintf("%s (%s)", model.DescribeOperation(op.Input, op.Output), model.DescribeOperationMetadata(op.Metadata))
}

func writeVisualisation(model porcupine.Model, info porcupine.LinearizationInfo, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(model, info, path)
}

// registerStore is one backend's registers: the workload's adapter per
// driver family.
type registerStore interface {
	// create makes the table with registers k0…k(keys-1) at 0.
	create(ctx context.Context, keys int) error
	// drop removes the table.
	drop(ctx context.Context) error
	// read returns key's value.
	read(ctx context.Context, key string) (int64, error)
	// write sets key's value (and moves its version) unconditionally.
	write(ctx context.Context, key string, value int64) error
	// cas reads key's value and version, passes the value to seen (once,
	// and only when the read succeeded) and writes the value seen returns
	// if the version is still the one read (optimistic.ErrConflict if
	// not), or, unsafe, whatever the version.
	cas(ctx context.Context, key string, unsafe bool, seen func(value int64) int64) error
	// ambiguous reports whether a write or cas that failed with err may
	// have taken effect.
	ambiguous(err error) bool
	close()
}

var (
	_ registerStore = (*registerPG)(nil)
	_ registerStore = (*registerMySQL)(nil)
	_ registerStore = (*registerDynamo)(nil)
)

// openRegister opens the store of e's backend (no I/O until used).
func openRegister(ctx context.Context, e *env, o registerOptions) (registerStore, error) {
	if !registerRunName.MatchString(e.Run) {
		return nil, fmt.Errorf("%w: run name %q is not an identifier", ErrInvalidConfig, e.Run)
	}
	// Transactions run once: a retried cas would read twice under one
	// operation, and a retried write would hide a lost COMMIT.
	tx := &pessimistic.Options{Isolation: o.isolation, Retry: retry.Policy{Retryable: func(error) bool { return false }}}
	timeout := opTimeout(e.TTL)
	switch e.Backend {
	case "postgres":
		return openRegisterPG(ctx, e, tx, timeout)
	case "mysql":
		return openRegisterMySQL(e, o, tx, timeout)
	case "dynamodb":
		return openRegisterDynamo(e, o), nil
	}
	return nil, fmt.Errorf("%w: register backend %q", ErrInvalidConfig, e.Backend)
}

// Statements of the PostgreSQL registers; %[1]s is the quoted table name.
const (
	registerPGCreate      = `CREATE TABLE %[1]s (id text PRIMARY KEY, value bigint NOT NULL, version bigint NOT NULL)`
	registerPGDrop        = `DROP TABLE IF EXISTS %[1]s`
	registerPGRead        = `SELECT value FROM %[1]s WHERE id = $1`
	registerPGReadVersion = `SELECT value, version FROM %[1]s WHERE id = $1`
	registerPGWrite       = `UPDATE %[1]s SET value = $2, version = version + 1 WHERE id = $1`
)

// registerPG is the PostgreSQL store (pgx v5).
type registerPG struct {
	pool  *pgxpool.Pool
	tx    *pessimistic.Options
	table optimistic.Table
	name  string // quoted table name
}

func openRegisterPG(ctx context.Context, e *env, tx *pessimistic.Options, timeout time.Duration) (*registerPG, error) {
	cfg, err := pgxpool.ParseConfig(e.Endpoints.Postgres)
	if err != nil {
		return nil, fmt.Errorf("chaos: postgres url: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = timeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: postgres: %w", err)
	}
	return &registerPG{pool: pool, tx: tx, table: optimistic.Table{Name: e.Run, KeyColumn: "id", VersionColumn: "version"},
		name: pgx.Identifier{e.Run}.Sanitize()}, nil
}

func (s *registerPG) sql(stmt string) string { return fmt.Sprintf(stmt, s.name) }

func (s *registerPG) create(ctx context.Context, keys int) error {
	if _, err := s.pool.Exec(ctx, s.sql(registerPGCreate)); err != nil {
		return err
	}
	t := upsert.Table{Name: s.table.Name, KeyColumn: "id"}
	for i := range keys {
		if _, err := upsertpg.Insert(ctx, s.pool, t, map[string]any{"id": registerKey(i), "value": int64(0), "version": int64(1)}); err != nil {
			return err
		}
	}
	return nil
}

func (s *registerPG) drop(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, s.sql(registerPGDrop))
	return err
}

func (s *registerPG) read(ctx context.Context, key string) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, s.sql(registerPGRead), key).Scan(&v)
	return v, err
}

// write is a transaction of one statement, so that, as for cas, only
// COMMIT can be ambiguous and pessimisticpg says when it is.
func (s *registerPG) write(ctx context.Context, key string, value int64) error {
	return pessimisticpg.InTx(ctx, s.pool, s.tx, func(ctx context.Context, tx pgx.Tx) error {
		return registerPGWriteRow(ctx, tx, s.sql(registerPGWrite), key, value)
	})
}

func registerPGWriteRow(ctx context.Context, tx pgx.Tx, stmt, key string, value int64) error {
	tag, err := tx.Exec(ctx, stmt, key, value)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("chaos: register %s: %w", key, optimistic.ErrNotFound)
	}
	return err
}

func (s *registerPG) cas(ctx context.Context, key string, unsafe bool, seen func(int64) int64) error {
	return pessimisticpg.InTx(ctx, s.pool, s.tx, func(ctx context.Context, tx pgx.Tx) error {
		var value, version int64
		if err := tx.QueryRow(ctx, s.sql(registerPGReadVersion), key).Scan(&value, &version); err != nil {
			return err
		}
		next := seen(value)
		if unsafe {
			return registerPGWriteRow(ctx, tx, s.sql(registerPGWrite), key, next)
		}
		_, err := optimisticpg.Update(ctx, tx, s.table, key, version, map[string]any{"value": next})
		return err
	})
}

func (*registerPG) ambiguous(err error) bool { return errors.Is(err, concurkit.ErrOutcomeUnknown) }

func (s *registerPG) close() { s.pool.Close() }

// Statements of the MySQL registers; %[1]s is the quoted table name.
const (
	registerMySQLCreateDB    = "CREATE DATABASE IF NOT EXISTS `" + registerDatabase + "`"
	registerMySQLCreate      = "CREATE TABLE %[1]s (id VARCHAR(32) NOT NULL PRIMARY KEY, `value` BIGINT NOT NULL, version BIGINT NOT NULL) ENGINE=InnoDB"
	registerMySQLDrop        = "DROP TABLE IF EXISTS %[1]s"
	registerMySQLRead        = "SELECT `value` FROM %[1]s WHERE id = ?"
	registerMySQLReadVersion = "SELECT `value`, version FROM %[1]s WHERE id = ?"
	registerMySQLWrite       = "UPDATE %[1]s SET `value` = ?, version = version + 1 WHERE id = ?"
)

// registerMySQL is the MySQL/MariaDB store (database/sql +
// go-sql-driver/mysql).
type registerMySQL struct {
	db    *sql.DB
	admin *mysql.Config // the DSN without a database, when setup must create it
	tx    *pessimistic.Options
	table optimistic.Table
	name  string // quoted table name
}

func openRegisterMySQL(e *env, o registerOptions, tx *pessimistic.Options, timeout time.Duration) (*registerMySQL, error) {
	cfg, err := mysql.ParseDSN(e.Endpoints.MySQL)
	if err != nil {
		return nil, fmt.Errorf("chaos: mysql dsn: %w", err)
	}
	s := &registerMySQL{tx: tx, table: optimistic.Table{Name: e.Run, KeyColumn: "id", VersionColumn: "version"},
		name: "`" + e.Run + "`"}
	if cfg.DBName == "" {
		s.admin = cfg.Clone()
		cfg.DBName = registerDatabase
	}
	o.mysql.apply(cfg, timeout)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: mysql: %w", err)
	}
	s.db = sql.OpenDB(conn)
	return s, nil
}

func (s *registerMySQL) sql(stmt string) string { return fmt.Sprintf(stmt, s.name) }

func (s *registerMySQL) create(ctx context.Context, keys int) error {
	if s.admin != nil {
		conn, err := mysql.NewConnector(s.admin)
		if err != nil {
			return err
		}
		admin := sql.OpenDB(conn)
		_, err = admin.ExecContext(ctx, registerMySQLCreateDB)
		_ = admin.Close()
		if err != nil {
			return err
		}
	}
	if _, err := s.db.ExecContext(ctx, s.sql(registerMySQLCreate)); err != nil {
		return err
	}
	t := upsert.Table{Name: s.table.Name, KeyColumn: "id"}
	for i := range keys {
		if _, err := upsertmysql.Insert(ctx, s.db, t, map[string]any{"id": registerKey(i), "value": int64(0), "version": int64(1)}); err != nil {
			return err
		}
	}
	return nil
}

func (s *registerMySQL) drop(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, s.sql(registerMySQLDrop))
	return err
}

func (s *registerMySQL) read(ctx context.Context, key string) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, s.sql(registerMySQLRead), key).Scan(&v)
	return v, err
}

// write is a transaction of one statement, so that, as for cas, only
// COMMIT can be ambiguous and pessimisticmysql says when it is.
func (s *registerMySQL) write(ctx context.Context, key string, value int64) error {
	return pessimisticmysql.InTx(ctx, s.db, s.tx, func(ctx context.Context, tx *sql.Tx) error {
		return s.writeRow(ctx, tx, key, value)
	})
}

func (s *registerMySQL) writeRow(ctx context.Context, tx *sql.Tx, key string, value int64) error {
	res, err := tx.ExecContext(ctx, s.sql(registerMySQLWrite), value, key)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	// The version always moves, so the row counts as changed whether or
	// not clientFoundRows counts matched rows instead.
	if n != 1 {
		return fmt.Errorf("chaos: register %s: %w", key, optimistic.ErrNotFound)
	}
	return nil
}

func (s *registerMySQL) cas(ctx context.Context, key string, unsafe bool, seen func(int64) int64) error {
	return pessimisticmysql.InTx(ctx, s.db, s.tx, func(ctx context.Context, tx *sql.Tx) error {
		var value, version int64
		if err := tx.QueryRowContext(ctx, s.sql(registerMySQLReadVersion), key).Scan(&value, &version); err != nil {
			return err
		}
		next := seen(value)
		if unsafe {
			return s.writeRow(ctx, tx, key, next)
		}
		_, err := optimisticmysql.Update(ctx, tx, s.table, key, version, map[string]any{"value": next})
		return err
	})
}

func (*registerMySQL) ambiguous(err error) bool { return errors.Is(err, concurkit.ErrOutcomeUnknown) }

func (s *registerMySQL) close() { _ = s.db.Close() }

// DynamoDB expressions of the registers' blind write. "value" is a
// reserved word there, hence the names.
const (
	registerDynamoWrite     = "SET #val = :val, #ver = #ver + :one"
	registerDynamoWriteCond = "attribute_exists(#id)"
)

// registerDynamo is the DynamoDB store (aws-sdk-go-v2).
type registerDynamo struct {
	db    *dynamodb.Client
	http  *http.Transport
	table optimistic.Table
}

// openRegisterDynamo makes a client with static dummy credentials, which
// DynamoDB Local accepts, and without the SDK's retries unless
// o.sdkRetries: a retried conditional update that had applied fails its
// condition and would be taken for a refusal.
func openRegisterDynamo(e *env, o registerOptions) *registerDynamo {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	opts := dynamodb.Options{
		BaseEndpoint: aws.String(e.Endpoints.DynamoDB),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("chaos", "chaos", ""),
		HTTPClient:   &http.Client{Transport: tr},
	}
	if !o.sdkRetries {
		opts.RetryMaxAttempts = 1
	}
	return &registerDynamo{db: dynamodb.New(opts), http: tr,
		table: optimistic.Table{Name: e.Run, KeyColumn: "id", VersionColumn: "version"}}
}

func (s *registerDynamo) create(ctx context.Context, keys int) error {
	name := aws.String(s.table.Name)
	_, err := s.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return err
	}
	// DynamoDB Local creates the table at once, AWS in seconds: poll
	// faster than the waiter's default 20 s.
	fast := func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 2*time.Second
	}
	if err := dynamodb.NewTableExistsWaiter(s.db, fast).Wait(ctx, &dynamodb.DescribeTableInput{TableName: name}, time.Minute); err != nil {
		return err
	}
	t := upsert.Table{Name: s.table.Name, KeyColumn: "id"}
	for i := range keys {
		if _, err := upsertdynamo.Insert(ctx, s.db, t, map[string]any{"id": registerKey(i), "value": int64(0), "version": int64(1)}); err != nil {
			return err
		}
	}
	return nil
}

func (s *registerDynamo) drop(ctx context.Context) error {
	_, err := s.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(s.table.Name)})
	if _, ok := errors.AsType[*types.ResourceNotFoundException](err); ok {
		return nil
	}
	return err
}

// get reads key's value and version with a strongly consistent read.
func (s *registerDynamo) get(ctx context.Context, key string) (value, version int64, err error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table.Name),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, 0, err
	}
	if out.Item == nil {
		return 0, 0, fmt.Errorf("chaos: register %s: %w", key, optimistic.ErrNotFound)
	}
	if value, err = registerDynamoNumber(out.Item, "value"); err != nil {
		return 0, 0, err
	}
	version, err = registerDynamoNumber(out.Item, "version")
	return value, version, err
}

func registerDynamoNumber(item map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("chaos: attribute %s is not a number", name)
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

func (s *registerDynamo) read(ctx context.Context, key string) (int64, error) {
	v, _, err := s.get(ctx, key)
	return v, err
}

func (s *registerDynamo) write(ctx context.Context, key string, value int64) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table.Name),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String(registerDynamoWrite),
		ConditionExpression:       aws.String(registerDynamoWriteCond),
		ExpressionAttributeNames:  map[string]string{"#id": "id", "#val": "value", "#ver": "version"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":val": &types.AttributeValueMemberN{Value: strconv.FormatInt(value, 10)}, ":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	return err
}

func (s *registerDynamo) cas(ctx context.Context, key string, unsafe bool, seen func(int64) int64) error {
	value, version, err := s.get(ctx, key)
	if err != nil {
		return err
	}
	next := seen(value)
	if unsafe {
		return s.write(ctx, key, next)
	}
	_, err = optimisticdynamo.Update(ctx, s.db, s.table, key, version, map[string]any{"value": next})
	return err
}

// ambiguous: an error the service answered as the client's fault (a
// failed condition, a validation error, throttling) was not applied;
// anything else — no answer, a server fault, an answer that could not be
// read — may have been.
func (*registerDynamo) ambiguous(err error) bool {
	var api smithy.APIError
	return !errors.As(err, &api) || api.ErrorFault() != smithy.FaultClient
}

func (s *registerDynamo) close() { s.http.CloseIdleConnections() }
