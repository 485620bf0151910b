package chaos

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencydynamo"
	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
)

// idempotentWorkload is the idempotent-HTTP workload. Every client process
// serves a real net/http server on 127.0.0.1 whose handler has one effect
// per run — a row with a fresh effect id in an effects table — and answers
// 201 with that id; safe, the handler sits behind idempotency.Middleware
// over the backend's key store (idempotencypg, idempotencymysql or
// idempotencydynamo), with the lock timeout of Options["lock_timeout"].
// The process's client loop then sends POSTs, each with a new
// Idempotency-Key, and retries the same request until it gets a final
// answer: it cancels a share of its attempts at a random point (a client
// that gave up), and retries after no answer, 409 (in progress), 429 or a
// 5xx that is not a replay. The keys' store and the effects go through
// the run's proxy, so database faults hit both; the HTTP traffic stays
// local. Unsafe (the negative control) the same handler runs without the
// middleware, detached from the client's cancellation as the middleware
// detaches it, so that every retry of a request whose run went on is a
// second effect.
//
// Effects live with the keys: in the run's schema on PostgreSQL, in a
// database named after the run on MariaDB/MySQL (created by setup, so the
// DSN's user needs CREATE and DROP), and in a table of their own on
// DynamoDB. The handler thinks 0–10 ms before and after its effect, so
// that cancellations and faults land on both sides of it. A failed effect
// is answered 503 (not executed: the key is released and a retry runs
// again) only when the write certainly did not apply — the server refused
// it, or it was never sent; otherwise 500, which the middleware stores:
// the request's final answer is then "unknown".
//
// History: a "request" operation per key (Ret: the effect id of the
// accepted 201; Unknown when the client gave up after
// idemKeyBound lock timeouts, got a stored 5xx, or the run ended; Fail for
// any other final answer), an "attempt" per HTTP exchange (Arg: attempt
// number; Ret: status, 0 without an answer; Expect: the effect id
// answered; Token: 1 when the answer was a replay; Err: why there was no
// answer, idemCancelled for the client's own random cancellation), and an
// "unstored" event per run whose response the middleware reported it did
// not store (the handler outlived its context, or storing failed): the
// middleware's documented at-least-once window, in which the key is
// released, or stays locked until the lock timeout, and a retry runs the
// handler again. Such a second run is not an anomaly: an effect made
// outside the key store cannot commit together with the stored response
// (DoPhases is what closes that window), so the checker allows one more
// effect per unstored run and notes how many keys used the allowance.
//
// The checker reads the effects and reports, per key:
//   - duplicate-effect: more effects than 1 + the key's unstored runs
//     (without the middleware, any second effect);
//   - lost-effect: the client accepted a 201 and no effect committed;
//   - wrong-answer: the client accepted an effect id that is not an
//     effect of its key (a replay of something that never committed);
//   - stored-cancellation: the final answer is a replay of what a handler
//     answered because its own context ended mid-effect (it says so in a
//     header): the middleware stored the client's giving up as the
//     operation's result;
//   - fabricated-answer: a replayed 2xx without an effect (the empty 200
//     of a handler that gave up without answering, stored);
//   - refused: a final answer that is neither an effect nor a stored
//     5xx (422 for the same request, 400, …);
//   - unknown-key: an effect of a key no client sent;
//   - blocked: a key answered 409 for longer than idemBlockedBound, from
//     the call of its first 409 attempt to the return of its last (the
//     bound is a lock timeout plus a run plus two of the longest faults
//     and a second: the checker does not see when faults were, so it is
//     loose; the longest span is noted). When the run's only fault is
//     latency, nothing may leave a claim behind — no process or
//     connection dies, no answer is lost, only the client's own
//     cancellations — so the lock timeout is not part of the bound: a
//     claim left locked (one whose statement was cancelled, say) is
//     found once the lock timeout is long against the TTL.
//
// Options (env.Options; unknown keys are left to other workloads):
//   - lock_timeout: the middleware's Config.LockTimeout, a
//     time.ParseDuration value; default the run's TTL.
//   - cancel: the probability, 0 to 1, that an attempt gets a random
//     cancellation point, uniform in [0, 2× the typical latency of an
//     answered attempt); default idemDefaultCancel.
type idempotentWorkload struct{}

var _ workload = idempotentWorkload{}

// Settings of the idempotent workload.
const (
	// idemDefaultCancel is the default share of attempts given a random
	// cancellation point; about half of those points fall before the
	// answer, so some 20% of requests are cancelled at least once.
	idemDefaultCancel = 0.4
	// idemKeyBound is how many lock timeouts a client keeps retrying one
	// key before it gives up on it (Unknown).
	idemKeyBound = 20
	// idemEffectSpan separates the effect ids of processes: process p's
	// handler numbers its effects p·idemEffectSpan + 1, + 2, …
	idemEffectSpan = 1_000_000_000
	// idemPrincipalHeader carries the principal (the run's name), as an
	// authenticating gateway would set it.
	idemPrincipalHeader = "X-Chaos-Principal"
	// idemCancelled is the Err of an attempt its client cancelled at its
	// random point.
	idemCancelled = "chaos: cancelled by the client"
	// idemThink bounds the handler's think time before and after its
	// effect.
	idemThink = 10 * time.Millisecond
)

// idemOptions are the workload's parsed Options.
type idemOptions struct {
	lockTimeout time.Duration
	cancel      float64
	mysql       mysqlOptions
}

// parseIdemOptions reads the workload's options; ttl is the run's TTL,
// the lock timeout's default.
func parseIdemOptions(opts map[string]string, ttl time.Duration) (idemOptions, error) {
	o := idemOptions{lockTimeout: ttl, cancel: idemDefaultCancel}
	if v, ok := opts["lock_timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("%w: option lock_timeout=%q: want a positive duration such as 300ms", ErrInvalidConfig, v)
		}
		o.lockTimeout = d
	}
	if v, ok := opts["cancel"]; ok {
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || p < 0 || p > 1 {
			return o, fmt.Errorf("%w: option cancel=%q: want a probability from 0 to 1", ErrInvalidConfig, v)
		}
		o.cancel = p
	}
	var err error
	o.mysql, err = parseMySQLOptions(opts)
	return o, err
}

// idemBlockedBound is how long a key may answer 409 before the checker
// calls it blocked: the lock timeout (a run that ended without storing
// holds the key that long), the time a run may take (under the lock
// timeout), two of the longest faults (3× the TTL each, since two can
// overlap one key's retries), and a second for backoff and scheduling.
// With latency the only fault (besides the clients' cancellations), a
// claim is held only while a run is in progress, so the lock timeouts drop
// out.
func idemBlockedBound(lockTimeout, ttl time.Duration, nemeses []string) time.Duration {
	if len(nemeses) > 0 && !slices.ContainsFunc(nemeses, func(k string) bool { return k != NemesisLatency }) {
		return 6*ttl + time.Second
	}
	return 2*lockTimeout + 6*ttl + time.Second
}

// systems: the backend's database holds both the keys and the effects.
func (idempotentWorkload) systems(backend string) ([]string, error) {
	switch backend {
	case "postgres", "mysql", "dynamodb":
		return []string{backend}, nil
	}
	return nil, fmt.Errorf("idempotent backend %q (want postgres, mysql or dynamodb)", backend)
}

// Statements of the PostgreSQL side; %[1]s is the run's schema (an
// identifier made by resolve, never input).
const (
	idemPGCreate  = `CREATE TABLE %[1]s.effects (effect bigint PRIMARY KEY, idem_key text NOT NULL, process int NOT NULL)`
	idemPGInsert  = `INSERT INTO %[1]s.effects (effect, idem_key, process) VALUES ($1, $2, $3)`
	idemPGEffects = `SELECT effect, idem_key, process FROM %[1]s.effects`
)

// Statements of the MySQL side; %[1]s is the run's database.
const (
	idemMySQLCreate  = "CREATE TABLE `%[1]s`.effects (effect BIGINT NOT NULL PRIMARY KEY, idem_key VARBINARY(255) NOT NULL, process INT NOT NULL) ENGINE=InnoDB"
	idemMySQLInsert  = "INSERT INTO `%[1]s`.effects (effect, idem_key, process) VALUES (?, ?, ?)"
	idemMySQLEffects = "SELECT effect, idem_key, process FROM `%[1]s`.effects"
)

// The key table's DDL is the toolkit migration's own file (version 2),
// run in the run's schema or database, so that the table is exactly the
// one the stores are built for.
const idemKeysMigration = "0002_idempotency.up.sql"

// idemDynamoKeys and idemDynamoEffects name the run's DynamoDB tables.
func idemDynamoKeys(run string) string    { return run + "_keys" }
func idemDynamoEffects(run string) string { return run + "_effects" }

// setup creates the key table and the effects table. Bad options fail
// here, before any client starts.
func (idempotentWorkload) setup(ctx context.Context, e *env) error {
	if _, err := parseIdemOptions(e.Options, e.TTL); err != nil {
		return err
	}
	switch e.Backend {
	case "postgres":
		return createScope(ctx, e, "postgres", []string{idemKeysMigration}, idemPGCreate)
	case "mysql":
		return createScope(ctx, e, "mysql", []string{idemKeysMigration}, idemMySQLCreate)
	case "dynamodb":
		c := dynamoClient(e.Endpoints.DynamoDB)
		if err := idempotencydynamo.CreateTable(ctx, c, idemDynamoKeys(e.Run)); err != nil {
			return fmt.Errorf("chaos: create key table: %w", err)
		}
		table := aws.String(idemDynamoEffects(e.Run))
		_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            table,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("effect"), AttributeType: types.ScalarAttributeTypeN}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("effect"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		if err != nil {
			return fmt.Errorf("chaos: create effects table: %w", err)
		}
		if err := dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: table}, time.Minute); err != nil {
			return fmt.Errorf("chaos: create effects table: %w", err)
		}
		return nil
	}
	return fmt.Errorf("chaos: idempotent backend %q", e.Backend)
}

// teardown drops the run's schema (PostgreSQL), database (MySQL) or
// tables (DynamoDB).
func (idempotentWorkload) teardown(ctx context.Context, e *env) error {
	switch e.Backend {
	case "postgres", "mysql":
		return dropScope(ctx, e, e.Backend)
	case "dynamodb":
		c := dynamoClient(e.Endpoints.DynamoDB)
		var errs []error
		for _, t := range []string{idemDynamoKeys(e.Run), idemDynamoEffects(e.Run)} {
			_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	return nil
}

// effectStore records a handler's effect.
type effectStore interface {
	// add commits effect id of key, made by process.
	add(ctx context.Context, key string, id int64, process int) error
	// refused reports whether err, from add, certainly left no effect:
	// the server refused the write, or it was never sent. Anything else
	// may have committed.
	refused(err error) bool
}

// idemPGEffectStore keeps effects in PostgreSQL.
type idemPGEffectStore struct {
	pool   *pgxpool.Pool
	insert string
}

// add inserts the effect's row (autocommit).
func (s idemPGEffectStore) add(ctx context.Context, key string, id int64, process int) error {
	_, err := s.pool.Exec(ctx, s.insert, id, key, process)
	return err
}

// refused: an error answer to an autocommit statement means it rolled
// back; SafeToRetry means nothing reached the server.
func (idemPGEffectStore) refused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) || pgconn.SafeToRetry(err)
}

// idemMySQLEffectStore keeps effects in MariaDB/MySQL.
type idemMySQLEffectStore struct {
	db     *sql.DB
	insert string
}

// add inserts the effect's row (autocommit).
func (s idemMySQLEffectStore) add(ctx context.Context, key string, id int64, process int) error {
	_, err := s.db.ExecContext(ctx, s.insert, id, key, process)
	return err
}

// refused: a server error answers an autocommit statement that rolled
// back; the driver returns ErrBadConn only when it sent nothing.
func (idemMySQLEffectStore) refused(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) || errors.Is(err, driver.ErrBadConn)
}

// idemDynamoEffectStore keeps effects in a DynamoDB table, one item per
// effect id, so that the SDK's retry of a put whose answer was lost
// writes the same item again rather than a second effect.
type idemDynamoEffectStore struct {
	client *dynamodb.Client
	table  *string
}

// add puts the effect's item.
func (s idemDynamoEffectStore) add(ctx context.Context, key string, id int64, process int) error {
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: map[string]types.AttributeValue{
		"effect":  &types.AttributeValueMemberN{Value: strconv.FormatInt(id, 10)},
		"key":     &types.AttributeValueMemberS{Value: key},
		"process": &types.AttributeValueMemberN{Value: strconv.Itoa(process)},
	}})
	return err
}

// refused is never sure on DynamoDB: an error after the SDK's retries may
// follow an attempt that applied and lost its answer.
func (idemDynamoEffectStore) refused(error) bool { return false }

// openIdem opens the key store and the effects of e's backend, and a
// function that closes what it opened.
func openIdem(ctx context.Context, e *env) (idempotency.Store, effectStore, func(), error) {
	switch e.Backend {
	case "postgres":
		pool, err := pgxpool.New(ctx, e.Endpoints.Postgres)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("chaos: postgres: %w", err)
		}
		st, err := idempotencypg.New(pool, &idempotencypg.Config{Table: idempotency.Table{Schema: e.Run}})
		if err != nil {
			pool.Close()
			return nil, nil, nil, err
		}
		return st, idemPGEffectStore{pool, fmt.Sprintf(idemPGInsert, e.Run)}, pool.Close, nil
	case "mysql":
		o, err := parseMySQLOptions(e.Options)
		if err != nil {
			return nil, nil, nil, err
		}
		db, err := openMySQL(e.Endpoints.MySQL, e.Run, opTimeout(e.TTL), o)
		if err != nil {
			return nil, nil, nil, err
		}
		db.SetMaxOpenConns(16)
		st, err := idempotencymysql.New(db, nil)
		if err != nil {
			_ = db.Close()
			return nil, nil, nil, err
		}
		return st, idemMySQLEffectStore{db, fmt.Sprintf(idemMySQLInsert, e.Run)}, func() { _ = db.Close() }, nil
	case "dynamodb":
		c := dynamoClient(e.Endpoints.DynamoDB)
		st, err := idempotencydynamo.New(c, &idempotencydynamo.Config{Table: idempotency.Table{Name: idemDynamoKeys(e.Run)}})
		if err != nil {
			return nil, nil, nil, err
		}
		return st, idemDynamoEffectStore{c, aws.String(idemDynamoEffects(e.Run))}, func() {}, nil
	}
	return nil, nil, nil, fmt.Errorf("chaos: idempotent backend %q", e.Backend)
}

// idemHandler is the handler under test: one effect per run, answered
// 201 with its id.
type idemHandler struct {
	effects effectStore
	process int
	n       atomic.Int64 // effects numbered so far

	mu  sync.Mutex // guards rng: the server runs handlers concurrently
	rng *rand.Rand
}

// idemAnswer is the handler's 201 body.
type idemAnswer struct {
	Effect int64 `json:"effect"`
}

// idemRequest is the request body.
type idemRequest struct {
	Key string `json:"key"`
}

// think sleeps 0 to idemThink, or until ctx ends.
func (h *idemHandler) think(ctx context.Context) {
	h.mu.Lock()
	d := time.Duration(h.rng.Int64N(int64(idemThink) + 1))
	h.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ServeHTTP makes the effect of the request's key and answers its id.
func (h *idemHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req idemRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Key == "" {
		http.Error(w, "want {\"key\": …}", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	h.think(ctx)
	if ctx.Err() != nil {
		// Like many handlers, give up without an answer once the request's
		// context ended: no effect, no response. Behind the middleware this
		// context ends only at the handler's deadline (it outlives its
		// client), and the middleware must never store the empty answer.
		return
	}
	id := int64(h.process)*idemEffectSpan + h.n.Add(1)
	if err := h.effects.add(ctx, req.Key, id, h.process); err != nil {
		if ctx.Err() != nil {
			// Say that this failure is the handler's context ending, not
			// the operation's outcome: stored and replayed, it would tell
			// the client that retries a result nobody had.
			w.Header().Set(idemCancelledHeader, "true")
		}
		if h.effects.refused(err) && ctx.Err() == nil {
			// Not executed: the middleware releases the key (503 is in
			// its NotExecuted) and a retry runs again.
			http.Error(w, "effect refused: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		// The effect may have committed: a final answer (stored), which
		// says so.
		http.Error(w, "effect unknown: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.think(ctx)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/effects/"+strconv.FormatInt(id, 10))
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(idemAnswer{Effect: id})
}

// idemDetached runs next as the middleware would, minus the idempotency:
// on a context that ignores the client's cancellation and ends at 9/10
// of lockTimeout. The negative control then differs from the safe run by
// the keys alone.
func idemDetached(lockTimeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), lockTimeout-lockTimeout/10)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// idemLog receives the middleware's log and records, as "unstored"
// events, the runs whose response it did not store. It recognises them
// by the middleware's messages ("response not stored…", "the handler
// outlived its context…"); TestIdempotentUnstored holds it to them.
type idemLog struct{ c *client }

// Enabled takes every level: the middleware logs what matters here as
// warnings and errors, and Handle sorts by message.
func (idemLog) Enabled(context.Context, slog.Level) bool { return true }

// Handle records r as an "unstored" event of its key if it reports a run
// whose response was not stored.
func (l idemLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "not stored") && !strings.Contains(r.Message, "outlived its context") {
		return nil // a failed claim: nothing ran, the attempt's 503 says it
	}
	op := Op{Kind: "unstored", Err: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "key":
			op.Key = a.Value.String()
		case "status":
			if a.Value.Kind() == slog.KindInt64 {
				op.Ret = a.Value.Int64()
			}
		}
		return true
	})
	l.c.complete(l.c.invoke(op), OK, nil)
	return nil
}

// WithAttrs returns l: the middleware puts the key on each record, not on
// the logger.
func (l idemLog) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l (see WithAttrs).
func (l idemLog) WithGroup(string) slog.Handler { return l }

// idemServer returns the client process's handler: the effect behind the
// middleware over store, or, unsafe, behind idemDetached.
func idemServer(c *client, store idempotency.Store, effects effectStore, o idemOptions) (http.Handler, error) {
	h := &idemHandler{effects: effects, process: c.process, rng: rand.New(rand.NewPCG(c.Seed, uint64(c.process)<<32|0x68))}
	if c.Unsafe {
		return idemDetached(o.lockTimeout, h), nil
	}
	mw, err := idempotency.Middleware(store, &idempotency.Config{
		Required:    true,
		Principal:   idempotency.PrincipalHeader(idemPrincipalHeader),
		LockTimeout: o.lockTimeout,
		Logger:      slog.New(idemLog{c}),
	})
	if err != nil {
		return nil, err
	}
	return mw(h), nil
}

// client serves the handler on 127.0.0.1 and sends it requests, one key
// at a time, until ctx ends.
func (idempotentWorkload) client(ctx context.Context, c *client) error {
	o, err := parseIdemOptions(c.Options, c.TTL)
	if err != nil {
		return err
	}
	store, effects, closeStore, err := openIdem(ctx, &c.env)
	if err != nil {
		return err
	}
	defer closeStore()
	handler, err := idemServer(c, store, effects, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("chaos: listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	ic := &idemClient{
		c: c, o: o, url: "http://" + ln.Addr().String() + "/effects",
		http:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}},
		timeout: opTimeout(c.TTL), typical: 10 * time.Millisecond,
	}
	defer ic.http.CloseIdleConnections()
	for n := 1; ctx.Err() == nil; n++ {
		ic.request(ctx, fmt.Sprintf("%s-%d-%d", c.Run, c.process, n))
	}
	return nil
}

// idemClient is a client process's HTTP client loop.
type idemClient struct {
	c       *client
	o       idemOptions
	url     string
	http    *http.Client
	timeout time.Duration // bounds one attempt
	typical time.Duration // moving average of answered attempts' latency
}

// idemReply is what one attempt got.
type idemReply struct {
	status   int // 0: no answer
	effect   int64
	replayed bool
	// handlerCancelled: the answer says its handler failed because its
	// context ended (idemCancelledHeader).
	handlerCancelled bool
	err              error // why there was no answer, or a 201 without an effect id
}

// idemCancelledHeader marks an answer the handler gave because its own
// context ended mid-effect.
const idemCancelledHeader = "Chaos-Handler-Cancelled"

// Errors that say why an attempt had no answer (context causes), and the
// final answers the checker reports.
var (
	errIdemCancelled = errors.New(idemCancelled)
	errIdemTimeout   = errors.New("chaos: attempt timed out")
	// errStoredCancellation: a replay of an answer its handler gave
	// because its context ended — the client that retries is told what a
	// cancellation did, not what the operation did.
	errStoredCancellation = errors.New("chaos: replayed the answer of a handler whose context ended")
	// errFabricated: a replayed success without an effect (a handler that
	// wrote nothing, stored as an empty 200).
	errFabricated = errors.New("chaos: replayed a success that carries no effect")
)

// request sends one request, with its key, until a final answer, and
// records it.
func (ic *idemClient) request(ctx context.Context, key string) {
	c := ic.c
	op := c.invoke(Op{Kind: "request", Key: key})
	body, _ := json.Marshal(idemRequest{Key: key}) // a string field: cannot fail
	giveUp := time.Now().Add(idemKeyBound * ic.o.lockTimeout)
	var last string
	for n := 1; ; n++ {
		rep := ic.attempt(ctx, key, body, n)
		if ctx.Err() != nil {
			c.complete(op, Unknown, fmt.Errorf("chaos: the run ended during attempt %d", n))
			return
		}
		if final, o, err := idemFinal(rep); final {
			op.Ret = rep.effect
			c.complete(op, o, err)
			return
		}
		if rep.status != 0 {
			last = strconv.Itoa(rep.status)
		} else {
			last = rep.err.Error()
		}
		if time.Now().After(giveUp) {
			c.complete(op, Unknown, fmt.Errorf("chaos: gave up after %d attempts (last: %s)", n, last))
			return
		}
		// Back off exponentially from 5 ms, capped at half a lock
		// timeout, with jitter so that a process's retries do not beat
		// in step with its old run.
		d := min(ic.o.lockTimeout/2, 5*time.Millisecond<<min(n-1, 8))
		d = d/2 + time.Duration(c.rng.Int64N(int64(d/2)+1))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// idemFinal says whether rep ends its request, and how: a 201 with an
// effect id is the accepted answer (OK); a replayed 5xx is the stored
// "effect unknown" (Unknown); any other replay, and any 4xx but 409 and
// 429, is a refusal (Fail). No answer, 409, 429 and a 5xx that is not a
// replay (the key was released, or never claimed) are retried.
func idemFinal(rep idemReply) (bool, Outcome, error) {
	switch {
	case rep.status == 0:
		return false, Pending, nil
	case rep.status == http.StatusCreated && rep.err == nil:
		return true, OK, nil
	case rep.replayed && rep.handlerCancelled:
		return true, Fail, errStoredCancellation
	case rep.replayed && rep.status < 300:
		return true, Fail, fmt.Errorf("%w: %d", errFabricated, rep.status)
	case rep.status < 300 && rep.status != http.StatusCreated:
		// A success that is not the handler's answer (the empty 200 of a
		// handler that gave up): not final, as a client would retry it.
		return false, Pending, nil
	case rep.replayed && rep.status >= 500:
		return true, Unknown, fmt.Errorf("chaos: stored answer %d", rep.status)
	case rep.replayed, rep.status == http.StatusCreated:
		return true, Fail, fmt.Errorf("chaos: answer %d (replayed %v): %v", rep.status, rep.replayed, rep.err)
	case rep.status == http.StatusConflict, rep.status == http.StatusTooManyRequests, rep.status >= 500:
		return false, Pending, nil
	}
	return true, Fail, fmt.Errorf("chaos: answer %d", rep.status)
}

// attempt sends the request once, records the exchange and returns what
// it got.
func (ic *idemClient) attempt(ctx context.Context, key string, body []byte, n int) idemReply {
	c := ic.c
	a := c.invoke(Op{Kind: "attempt", Key: key, Arg: int64(n)})
	actx, cancel := context.WithTimeoutCause(ctx, ic.timeout, errIdemTimeout)
	defer cancel()
	if c.rng.Float64() < ic.o.cancel {
		// A client that gives up at a random point: before the request
		// is sent, while it runs, or as its answer arrives.
		at := time.Duration(c.rng.Int64N(int64(2*ic.typical) + 1))
		var stop context.CancelFunc
		actx, stop = context.WithTimeoutCause(actx, at, errIdemCancelled)
		defer stop()
	}
	start := time.Now()
	rep := ic.send(actx, key, body)
	if rep.status == 0 {
		if cause := context.Cause(actx); cause != nil && ctx.Err() == nil {
			rep.err = cause
		}
		c.complete(a, Unknown, rep.err)
		return rep
	}
	// Track the typical latency (an exponential moving average over
	// answered attempts), so that cancellation points follow it when
	// faults slow the server down.
	ic.typical += (time.Since(start) - ic.typical) / 10
	a.Ret, a.Expect = int64(rep.status), rep.effect
	if rep.replayed {
		a.Token = 1
	}
	c.complete(a, OK, rep.err)
	return rep
}

// send makes one HTTP exchange.
func (ic *idemClient) send(ctx context.Context, key string, body []byte) idemReply {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ic.url, bytes.NewReader(body))
	if err != nil {
		return idemReply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.DefaultHeader, idempotency.FormatKey(key))
	req.Header.Set(idemPrincipalHeader, ic.c.Run)
	resp, err := ic.http.Do(req)
	if err != nil {
		return idemReply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return idemReply{err: err} // cut off: as good as no answer
	}
	rep := idemReply{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.ReplayHeader) == "true",
		handlerCancelled: resp.Header.Get(idemCancelledHeader) == "true"}
	if rep.status == http.StatusCreated {
		var ans idemAnswer
		if err := json.Unmarshal(b, &ans); err != nil || ans.Effect == 0 {
			rep.err = fmt.Errorf("chaos: 201 without an effect id: %q", b)
		}
		rep.effect = ans.Effect
	}
	return rep
}

// effectRow is one committed effect, as the effects table holds it.
type effectRow struct {
	Effect  int64
	Key     string
	Process int
}

// check reads the committed effects and judges the history against them.
func (idempotentWorkload) check(ctx context.Context, e *env, ops []Op) (*Report, error) {
	o, err := parseIdemOptions(e.Options, e.TTL)
	if err != nil {
		return nil, err
	}
	effects, err := readEffects(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("chaos: read effects: %w", err)
	}
	return checkIdempotent(ops, effects, idemBlockedBound(o.lockTimeout, e.TTL, e.Nemeses)), nil
}

// readEffects reads every committed effect of the run.
func readEffects(ctx context.Context, e *env) ([]effectRow, error) {
	switch e.Backend {
	case "postgres":
		conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		rows, err := conn.Query(ctx, fmt.Sprintf(idemPGEffects, e.Run))
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowToStructByPos[effectRow])
	case "mysql":
		db, err := openMySQL(e.Endpoints.MySQL, "", opTimeout(e.TTL), mysqlOptions{})
		if err != nil {
			return nil, err
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, fmt.Sprintf(idemMySQLEffects, e.Run))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []effectRow
		for rows.Next() {
			var r effectRow
			if err := rows.Scan(&r.Effect, &r.Key, &r.Process); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rows.Err()
	case "dynamodb":
		var out []effectRow
		p := dynamodb.NewScanPaginator(dynamoClient(e.Endpoints.DynamoDB), &dynamodb.ScanInput{
			TableName: aws.String(idemDynamoEffects(e.Run)), ConsistentRead: aws.Bool(true),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, item := range page.Items {
				r, err := idemDynamoRow(item)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("chaos: idempotent backend %q", e.Backend)
}

// idemDynamoRow decodes an effect item.
func idemDynamoRow(item map[string]types.AttributeValue) (effectRow, error) {
	var r effectRow
	eff, ok1 := item["effect"].(*types.AttributeValueMemberN)
	key, ok2 := item["key"].(*types.AttributeValueMemberS)
	proc, ok3 := item["process"].(*types.AttributeValueMemberN)
	if !ok1 || !ok2 || !ok3 {
		return r, fmt.Errorf("chaos: malformed effect item %v", item)
	}
	var err1, err2 error
	r.Effect, err1 = strconv.ParseInt(eff.Value, 10, 64)
	r.Process, err2 = strconv.Atoi(proc.Value)
	r.Key = key.Value
	return r, errors.Join(err1, err2)
}

// idemTally is what a history of the idempotent workload shows, per key
// and in total.
type idemTally struct {
	requests map[string]Op   // the request of each key
	attempts map[string][]Op // the attempts of each key
	unstored map[string]int  // each key's runs the middleware reported unstored
	outcomes map[Outcome]int // requests by outcome
	answers  map[int64]int   // answered attempts by status
	// cancelled counts the attempts their client cancelled at the random
	// point, and cancelledKeys the requests with at least one.
	cancelled     int
	cancelledKeys map[string]bool
	noAnswer      int // attempts without an answer, cancelled ones included
	replays       int // answers marked Idempotent-Replayed
	attemptCount  int
}

// tallyIdempotent sorts a history's operations by key.
func tallyIdempotent(ops []Op) *idemTally {
	t := &idemTally{requests: map[string]Op{}, attempts: map[string][]Op{}, unstored: map[string]int{},
		outcomes: map[Outcome]int{}, answers: map[int64]int{}, cancelledKeys: map[string]bool{}}
	for _, op := range ops {
		switch op.Kind {
		case "request":
			t.requests[op.Key] = op
			t.outcomes[op.Outcome]++
		case "attempt":
			t.attempts[op.Key] = append(t.attempts[op.Key], op)
			t.attemptCount++
			switch {
			case op.Outcome == OK:
				t.answers[op.Ret]++
				if op.Token == 1 {
					t.replays++
				}
			case op.Err == idemCancelled:
				t.cancelled++
				t.cancelledKeys[op.Key] = true
				t.noAnswer++
			default:
				t.noAnswer++
			}
		case "unstored":
			t.unstored[op.Key]++
		}
	}
	return t
}

// cancelledShare is the share of requests cancelled at least once.
func (t *idemTally) cancelledShare() float64 {
	if len(t.requests) == 0 {
		return 0
	}
	return float64(len(t.cancelledKeys)) / float64(len(t.requests))
}

// checkIdempotent judges a history against the committed effects (see
// idempotentWorkload for the anomalies); blockedBound is the longest a
// key may answer 409.
func checkIdempotent(ops []Op, effects []effectRow, blockedBound time.Duration) *Report {
	r := &Report{}
	t := tallyIdempotent(ops)
	byKey := map[string][]effectRow{}
	for _, e := range effects {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		if _, ok := t.requests[key]; !ok {
			r.add("unknown-key", "effects %v of key %q, which no client sent", idemIDs(byKey[key]), key)
		}
	}
	var reruns, ambiguousWith, ambiguousWithout int
	var maxBlocked time.Duration
	var maxBlockedKey string
	for _, key := range slices.Sorted(maps.Keys(t.requests)) {
		op := t.requests[key]
		effs := byKey[key]
		allowed := 1 + t.unstored[key]
		switch {
		case len(effs) > allowed:
			r.add("duplicate-effect", "key %q: %d effects %v (its runs the middleware reported unstored: %d); request %s",
				key, len(effs), idemIDs(effs), t.unstored[key], idemDescribe(op))
		case len(effs) > 1:
			reruns++
		}
		switch {
		case op.Outcome == OK && len(effs) == 0:
			r.add("lost-effect", "key %q: the client accepted effect %d, none committed", key, op.Ret)
		case op.Outcome == OK && !slices.ContainsFunc(effs, func(e effectRow) bool { return e.Effect == op.Ret }):
			r.add("wrong-answer", "key %q: the client accepted effect %d, the key's effects are %v", key, op.Ret, idemIDs(effs))
		case op.Outcome == Fail && op.Err == errStoredCancellation.Error():
			r.add("stored-cancellation", "key %q: the final answer is a replay of a handler cut off by its context; effects %v", key, idemIDs(effs))
		case op.Outcome == Fail && strings.HasPrefix(op.Err, errFabricated.Error()):
			r.add("fabricated-answer", "key %q: %s; effects %v", key, op.Err, idemIDs(effs))
		case op.Outcome == Fail:
			r.add("refused", "key %q: %s; effects %v", key, op.Err, idemIDs(effs))
		case op.Outcome.Ambiguous() && len(effs) > 0:
			ambiguousWith++
		case op.Outcome.Ambiguous():
			ambiguousWithout++
		}
		var first, last int64
		for _, a := range t.attempts[key] {
			if a.Outcome != OK || a.Ret != http.StatusConflict {
				continue
			}
			if first == 0 || a.Call < first {
				first = a.Call
			}
			last = max(last, a.Return)
		}
		if d := time.Duration(last - first); first != 0 && d > maxBlocked {
			maxBlocked, maxBlockedKey = d, key
		}
		if d := time.Duration(last - first); first != 0 && d > blockedBound {
			r.add("blocked", "key %q answered 409 for %s (bound %s); request %s", key, d.Round(time.Millisecond), blockedBound, idemDescribe(op))
		}
	}
	unstored := 0
	for _, n := range t.unstored {
		unstored += n
	}
	reqs := len(t.requests)
	r.note("%d requests: %d answered with an effect, %d unknown, %d pending, %d refused", reqs,
		t.outcomes[OK], t.outcomes[Unknown], t.outcomes[Pending], t.outcomes[Fail])
	r.note("%d attempts (%d retries); %d cancelled by their client at a random point, in %d requests (%.1f%%); %d others without an answer",
		t.attemptCount, t.attemptCount-reqs, t.cancelled, len(t.cancelledKeys), 100*t.cancelledShare(), t.noAnswer-t.cancelled)
	r.note("answers: %s; %d of them replays", idemStatuses(t.answers), t.replays)
	r.note("%d effects committed; ambiguous requests: %d with an effect, %d without", len(effects), ambiguousWith, ambiguousWithout)
	r.note("%d runs the middleware reported unstored (their keys may run again); %d keys ran twice or more within that allowance", unstored, reruns)
	if maxBlocked > 0 {
		r.note("longest 409 span: %s (key %q); reported as blocked beyond %s", maxBlocked.Round(time.Millisecond), maxBlockedKey, blockedBound)
	} else {
		r.note("no 409 answers")
	}
	return r.finish()
}

// idemIDs lists the effect ids of rows.
func idemIDs(rows []effectRow) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.Effect
	}
	slices.Sort(ids)
	return ids
}

// idemDescribe says how a request ended.
func idemDescribe(op Op) string {
	s := fmt.Sprintf("process %d #%d %s", op.Process, op.Seq, op.Outcome)
	if op.Outcome == OK {
		s += fmt.Sprintf(" effect %d", op.Ret)
	}
	if op.Err != "" {
		s += " (" + op.Err + ")"
	}
	return s
}

// idemStatuses formats answer counts by status.
func idemStatuses(m map[int64]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d×%d", m[s], s))
	}
	return strings.Join(parts, ", ")
}
