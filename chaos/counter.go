package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/dynamolock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

// counterWorkload is the fenced counter. Every client loops: take the lease
// of one lock key, read the counter, think, write the value read + 1 and
// a row of a log table in one transaction, release. Safe, both the read
// and the write carry the lease's token through fencedpg (the read
// advances the counter row's token, so a holder whose lease expired
// between its read and its write is refused even when its successor has
// not written yet); unsafe (the negative control), they carry none.
//
// Clients deliberately ignore their lease's Context: fencing must protect
// storage from the worst client, one that writes after its lease ended (a
// pause between its check and its write does the same to a careful one).
//
// The checker reads the log in commit order (the row lock on the counter
// serializes the transactions) and reports:
//   - lost-update: a logged value that is not the previous one + 1 (two
//     holders read the same value);
//   - stale-write: a write accepted with a lower token than an earlier one
//     (an old holder's write after a newer holder's);
//   - lost-ack: an increment the client was told committed, not logged;
//   - phantom: a logged increment the client was told failed;
//   - final: the counter's value is not the last logged value.
//
// Options: "redis_context_timeout" (see redisOptions; redis and redlock);
// "think", the longest random pause between read and write (a
// duration; default 10ms); "cancel", the share of operations whose context
// the client cancels at a random point (see client.opContext; default
// 0.1) — an Acquire given up on, a write cut off before or during its
// COMMIT, a Release abandoned.
//
// Increments whose COMMIT got no answer (or whose process was killed) are
// ambiguous: either way is accepted, and their number is noted.
type counterWorkload struct{}

// lockSystems maps counter backends to the servers their locks use.
var lockSystems = map[string]string{
	"redis": "redis", "redlock": "redlock", "zookeeper": "zookeeper",
	"etcd": "etcd", "dynamodb": "dynamodb", "postgres": "postgres",
}

func (counterWorkload) systems(backend string) ([]string, error) {
	s, ok := lockSystems[backend]
	if !ok {
		return nil, fmt.Errorf("counter backend %q (want redis, redlock, zookeeper, etcd, dynamodb or postgres)", backend)
	}
	if s == "postgres" {
		return []string{"postgres"}, nil
	}
	return []string{"postgres", s}, nil
}

// SQL of the counter's tables; %[1]s is the run's name (an identifier made
// by resolve, never input). Each counter is a row "c0", "c1", ….
const (
	counterCreate = `CREATE TABLE %[1]s (id text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0, value bigint NOT NULL DEFAULT 0);
CREATE TABLE %[1]s_log (n bigserial PRIMARY KEY, key text NOT NULL, process int NOT NULL, seq bigint NOT NULL, token bigint NOT NULL, value bigint NOT NULL DEFAULT 0);
INSERT INTO %[1]s (id) SELECT 'c' || i FROM generate_series(0, %[2]d - 1) AS i;
CREATE SEQUENCE %[1]s_tokens;
CREATE SEQUENCE %[1]s_locktokens`
	counterDrop    = `DROP TABLE IF EXISTS %[1]s, %[1]s_log; DROP SEQUENCE IF EXISTS %[1]s_tokens, %[1]s_locktokens`
	counterRead    = `SELECT value FROM %[1]s WHERE id = $1`
	counterReadAll = `SELECT id, value FROM %[1]s`
	counterWrite   = `UPDATE %[1]s SET value = $1 WHERE id = $2`
	counterLog     = `INSERT INTO %[1]s_log (key, process, seq, token, value) VALUES ($1, $2, $3, $4, $5)`
	counterLogAll  = `SELECT key, process, seq, token, value FROM %[1]s_log ORDER BY n`
)

// counterOptions are the counter's settings (env.Options): "keys", the
// number of counters, each under its own lock (default 1; more let a run
// make more fenced writes in the same time: each holder pause stalls one
// key, not all), and "think" (see counterThink).
type counterOptions struct {
	keys  int
	think time.Duration
}

// counterMaxKeys bounds Options["keys"].
const counterMaxKeys = 1000

func parseCounterOptions(m map[string]string) (counterOptions, error) {
	o := counterOptions{keys: 1, think: counterThink}
	if v, ok := m["keys"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > counterMaxKeys {
			return o, fmt.Errorf("%w: counter option keys=%q: want 1 to %d", ErrInvalidConfig, v, counterMaxKeys)
		}
		o.keys = n
	}
	if v, ok := m["think"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return o, fmt.Errorf("%w: counter option think=%q: want a duration", ErrInvalidConfig, v)
		}
		o.think = d
	}
	return o, nil
}

// counterKey names counter i.
func counterKey(i int) string { return "c" + strconv.Itoa(i) }

func (counterWorkload) setup(ctx context.Context, e *env) error {
	conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
	if err != nil {
		return fmt.Errorf("chaos: postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	o, err := parseCounterOptions(e.Options)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(counterCreate, e.Run, o.keys)); err != nil {
		return fmt.Errorf("chaos: create counter: %w", err)
	}
	if e.Backend == "dynamodb" {
		if err := dynamolock.CreateTable(ctx, dynamoClient(e.Endpoints.DynamoDB), e.Run, ""); err != nil {
			return fmt.Errorf("chaos: create lock table: %w", err)
		}
	}
	return nil
}

func (counterWorkload) teardown(ctx context.Context, e *env) error {
	conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf(counterDrop, e.Run))
	if e.Backend == "dynamodb" {
		_, derr := dynamoClient(e.Endpoints.DynamoDB).DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(e.Run)})
		err = errors.Join(err, derr)
	}
	return err
}

// dynamoClient is a DynamoDB client for endpoint with the SDK's defaults
// (its own retries included: the retried applied request is one of the
// faults under test) and dummy credentials, which DynamoDB Local accepts.
func dynamoClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("chaos", "chaos", ""),
		HTTPClient:   &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
	})
}

// locker opens the Locker of e's backend, with its clients' default
// options, and a function that closes what it opened.
func locker(ctx context.Context, e *env, pool *pgxpool.Pool) (distlock.Locker, func(), error) {
	src, err := fencedpg.NewSequence(pool, e.Run+"_tokens")
	if err != nil {
		return nil, nil, err
	}
	eps := e.Endpoints
	switch e.Backend {
	case "redis":
		c := goredis.NewClient(redisOptions(e, eps.Redis))
		l, err := redislock.New(c, &redislock.Config{Source: src, FenceTTL: time.Hour})
		return l, func() { _ = c.Close() }, err
	case "redlock":
		cs := make([]*goredis.Client, len(eps.Redlock))
		for i, a := range eps.Redlock {
			cs[i] = goredis.NewClient(redisOptions(e, a))
		}
		l, err := redlock.New(cs, &redlock.Config{Source: src, FenceTTL: time.Hour})
		return l, func() {
			for _, c := range cs {
				_ = c.Close()
			}
		}, err
	case "zookeeper":
		l, err := zklock.New(eps.ZooKeeper, &zklock.Config{Root: "/" + e.Run})
		if err != nil {
			return nil, nil, err
		}
		return l, func() { _ = l.Close(context.WithoutCancel(ctx)) }, nil
	case "etcd":
		c, err := clientv3.New(clientv3.Config{Endpoints: eps.Etcd, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, nil, err
		}
		l, err := etcdlock.New(c, &etcdlock.Config{Prefix: "/" + e.Run + "/"})
		if err != nil {
			_ = c.Close()
			return nil, nil, err
		}
		return l, func() { _ = l.Close(context.WithoutCancel(ctx)); _ = c.Close() }, nil
	case "dynamodb":
		l, err := dynamolock.New(dynamoClient(eps.DynamoDB), &dynamolock.Config{Table: e.Run})
		return l, func() {}, err
	case "postgres":
		l, err := pglock.New(pool, &pglock.Config{Sequence: e.Run + "_locktokens"})
		return l, func() {}, err
	}
	return nil, nil, fmt.Errorf("chaos: unknown lock backend %q", e.Backend)
}

// counterThink is the default of Options["think"]: the longest random
// pause between a client's read and its write. The longer it is, the more
// often a client pause lands between the two, which is where a missing
// fence shows.
const counterThink = 10 * time.Millisecond

// opTimeout bounds one storage operation, so that a frozen server or a
// dropped answer costs a client at most this long.
func opTimeout(ttl time.Duration) time.Duration { return max(2*ttl, time.Second) }

func (counterWorkload) client(ctx context.Context, c *client) error {
	pool, err := pgxpool.New(ctx, c.Endpoints.Postgres)
	if err != nil {
		return err
	}
	defer pool.Close()
	l, closeLocker, err := locker(ctx, &c.env, pool)
	if err != nil {
		return err
	}
	defer closeLocker()
	table := fenced.Table{Name: c.Run, KeyColumn: "id"}
	o, err := parseCounterOptions(c.Options)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		key := counterKey(c.rng.IntN(o.keys))
		acq := c.invoke(Op{Kind: "acquire", Key: key})
		actx, cancel := c.opContext(ctx, 5*c.TTL)
		lease, err := l.Acquire(actx, c.Run+"-"+key, &distlock.Options{TTL: c.TTL})
		cancel()
		if err != nil {
			c.complete(acq, Fail, err)
			continue
		}
		acq.Token = int64(lease.Token())
		c.complete(acq, OK, nil)
		c.holdAndIncrement(ctx, pool, table, key, lease.Token(), o.think)
		c.release(ctx, key, acq.Token, lease.Release)
	}
	return nil
}

// release runs fn (a lease's Release, a term's Resign), recorded as a
// "release" of key with token: OK, Fail when the lease was lost already,
// Unknown otherwise. Its context outlives ctx's end, bounded as every
// operation's.
func (c *client) release(ctx context.Context, key string, token int64, fn func(context.Context) error) {
	rel := c.invoke(Op{Kind: "release", Key: key, Token: token})
	rctx, cancel := c.opContext(context.WithoutCancel(ctx), opTimeout(c.TTL))
	err := fn(rctx)
	cancel()
	switch {
	case err == nil:
		c.complete(rel, OK, nil)
	case errors.Is(err, distlock.ErrLeaseLost):
		c.complete(rel, Fail, err)
	default:
		c.complete(rel, Unknown, err)
	}
}

// holdAndIncrement is the critical section: read, think, write + 1.
func (c *client) holdAndIncrement(ctx context.Context, pool *pgxpool.Pool, table fenced.Table, key string, token fenced.Token, think time.Duration) {
	read := c.invoke(Op{Kind: "read", Key: key, Token: int64(token)})
	v, err := c.readCounter(ctx, pool, table, key, token)
	if err != nil {
		c.complete(read, Fail, err) // a read changes nothing the checker counts
		return
	}
	read.Ret = v
	c.complete(read, OK, nil)
	if t := time.Duration(c.rng.Int64N(int64(think) + 1)); t > 0 {
		time.Sleep(t) // the work between read and write: a pause lands here too
	}
	inc := c.invoke(Op{Kind: "incr", Key: key, Token: int64(token), Arg: v + 1})
	o, err := c.writeCounter(ctx, pool, table, token, inc)
	c.complete(inc, o, err)
}

func (c *client) readCounter(ctx context.Context, pool *pgxpool.Pool, table fenced.Table, key string, token fenced.Token) (int64, error) {
	ctx, cancel := c.opContext(ctx, opTimeout(c.TTL))
	defer cancel()
	var v int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if !c.Unsafe {
			// Admit the token on the row: a later write with a lower one
			// is refused from now on.
			if err := fencedpg.Write(ctx, tx, table, key, token, nil); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, fmt.Sprintf(counterRead, c.Run), key).Scan(&v)
	})
	return v, err
}

// writeCounter writes op.Arg and logs it in one transaction. Only the
// COMMIT's failure is ambiguous: before it, nothing can have committed.
func (c *client) writeCounter(ctx context.Context, pool *pgxpool.Pool, table fenced.Table, token fenced.Token, op Op) (Outcome, error) {
	ctx, cancel := c.opContext(ctx, opTimeout(c.TTL))
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return Fail, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if c.Unsafe {
		_, err = tx.Exec(ctx, fmt.Sprintf(counterWrite, c.Run), op.Arg, op.Key)
	} else {
		err = fencedpg.Update(ctx, tx, table, op.Key, token, map[string]any{"value": op.Arg})
	}
	if err == nil {
		_, err = tx.Exec(ctx, fmt.Sprintf(counterLog, c.Run), op.Key, op.Process, op.Seq, op.Token, op.Arg)
	}
	if err != nil {
		return Fail, err
	}
	if err := tx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxClosed) || strings.Contains(err.Error(), "rollback") {
			return Fail, err
		}
		return Unknown, err
	}
	return OK, nil
}

func (counterWorkload) check(ctx context.Context, e *env, ops []Op) (*Report, error) {
	conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
	if err != nil {
		return nil, fmt.Errorf("chaos: postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, fmt.Sprintf(counterLogAll, e.Run))
	if err != nil {
		return nil, fmt.Errorf("chaos: read log: %w", err)
	}
	log, err := pgx.CollectRows(rows, pgx.RowToStructByPos[logRow])
	if err != nil {
		return nil, fmt.Errorf("chaos: read log: %w", err)
	}
	rows, err = conn.Query(ctx, fmt.Sprintf(counterReadAll, e.Run))
	if err != nil {
		return nil, fmt.Errorf("chaos: read counters: %w", err)
	}
	finals := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("chaos: read counters: %w", err)
		}
		finals[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chaos: read counters: %w", err)
	}
	return checkCounters(ops, log, finals), nil
}

// checkCounters checks each counter on its own (checkCounter) and merges
// the reports: anomalies are named by key, counts and notes summed.
func checkCounters(ops []Op, log []logRow, finals map[string]int64) *Report {
	opsBy := map[string][]Op{}
	for _, op := range ops {
		opsBy[op.Key] = append(opsBy[op.Key], op)
	}
	logBy := map[string][]logRow{}
	for _, row := range log {
		logBy[row.Key] = append(logBy[row.Key], row)
	}
	r := &Report{}
	var acked, ambiguous, committed int
	for _, key := range slices.Sorted(maps.Keys(finals)) {
		k, a, u := checkCounter(opsBy[key], logBy[key], finals[key])
		for _, a := range k.Anomalies {
			r.add(a.Kind, "%s: %s", key, a.Detail)
		}
		for kind, n := range k.Counts {
			// add counted the listed ones; count the rest.
			if listed := min(n, maxDetails); n > listed {
				r.Counts[kind] += n - listed
			}
		}
		acked += a
		ambiguous += u
		committed += len(logBy[key])
	}
	r.note("%d counters: %d increments acknowledged, %d ambiguous, %d committed", len(finals), acked, ambiguous, committed)
	return r.finish()
}

// logRow is one accepted increment, as the log table holds it.
type logRow struct {
	Key     string
	Process int
	Seq     int64
	Token   int64
	Value   int64
}

// checkCounter judges one counter's history against the log of its
// accepted increments (in commit order) and its final value, and returns
// the numbers of increments acknowledged and ambiguous.
func checkCounter(ops []Op, log []logRow, final int64) (*Report, int, int) {
	r := &Report{}
	incs := map[[2]int64]Op{}
	for _, op := range ops {
		if op.Kind == "incr" {
			incs[[2]int64{int64(op.Process), op.Seq}] = op
		}
	}
	var prev, maxTok int64
	logged := map[[2]int64]bool{}
	for i, row := range log {
		id := [2]int64{int64(row.Process), row.Seq}
		logged[id] = true
		if row.Value != prev+1 {
			r.add("lost-update", "log #%d: process %d wrote %d after %d was written (it read a value another holder had already incremented)", i+1, row.Process, row.Value, prev)
		}
		if row.Token < maxTok {
			r.add("stale-write", "log #%d: process %d's write with token %d accepted after one with token %d", i+1, row.Process, row.Token, maxTok)
		}
		prev, maxTok = row.Value, max(maxTok, row.Token)
		if op, ok := incs[id]; ok && op.Outcome == Fail {
			r.add("phantom", "log #%d: process %d's increment %d committed but returned %q", i+1, row.Process, row.Seq, op.Err)
		}
	}
	var ok, ambiguous int
	for id, op := range incs {
		switch {
		case op.Outcome == OK:
			ok++
			if !logged[id] {
				r.add("lost-ack", "process %d's increment %d to %d returned OK but is not in the log", op.Process, op.Seq, op.Arg)
			}
		case op.Outcome.Ambiguous():
			ambiguous++
		}
	}
	if final != prev {
		r.add("final", "the counter holds %d, the log's last value is %d", final, prev)
	}
	return r.finish(), ok, ambiguous
}
