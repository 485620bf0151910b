// Package idemtest is the behaviour suite every idempotency key store runs
// against its real server (idempotencypg on PostgreSQL, idempotencymysql
// on MariaDB, idempotencydynamo on DynamoDB Local), so that all of them
// are held to the same assertions, written once: the rules of the IETF
// Idempotency-Key draft, exactly-once under concurrent duplicates, bad
// keys, expiry and reaping, lock take-over and fencing, and Do.
package idemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/internal/problem"
)

// Env is one store with an empty key table, and a counter table on a SQL
// server for the handlers' effects.
type Env struct {
	Store   idempotency.Store
	Counter Counter
	// Rows returns how many keys the store holds.
	Rows func(ctx context.Context) (int, error)
	// Locked returns how many keys are locked: held by a run in progress,
	// or left locked by one that is gone.
	Locked func(ctx context.Context) (int, error)
}

// PGEnv is the Env of s, a store on the default key table in pool's
// schema, with a PGCounter there.
func PGEnv(t testing.TB, pool *pgxpool.Pool, s idempotency.Store) Env {
	t.Helper()
	count := func(where string) func(ctx context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			var n int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM concurkit_idempotency_keys WHERE `+where).Scan(&n)
			return n, err
		}
	}
	return Env{Store: s, Counter: PGCounter(t, pool), Rows: count("true"), Locked: count("locked_at IS NOT NULL")}
}

// MySQLEnv is the Env of s, a store on the default key table in db's
// database, with a MySQLCounter there.
func MySQLEnv(t testing.TB, db *sql.DB, s idempotency.Store) Env {
	t.Helper()
	count := func(where string) func(ctx context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			var n int
			err := db.QueryRowContext(ctx, `SELECT count(*) FROM concurkit_idempotency_keys WHERE `+where).Scan(&n)
			return n, err
		}
	}
	return Env{Store: s, Counter: MySQLCounter(t, db), Rows: count("TRUE"), Locked: count("locked_at IS NOT NULL")}
}

// Counter is a table of named counters on a SQL server: the effect the
// suite's handlers have, counted by the database rather than by the test.
type Counter interface {
	// Incr adds one to the counter name in a transaction of its own and
	// returns the new value.
	Incr(ctx context.Context, name string) (int64, error)
	All(ctx context.Context) (map[string]int64, error)
}

// PGCounter is a Counter on PostgreSQL; it creates its table.
func PGCounter(t testing.TB, pool *pgxpool.Pool) Counter {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `CREATE TABLE idemtest_counters (name text PRIMARY KEY, n bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pgCounter{pool}
}

type pgCounter struct{ pool *pgxpool.Pool }

func (c pgCounter) Incr(ctx context.Context, name string) (int64, error) {
	var n int64
	err := c.pool.QueryRow(ctx, `INSERT INTO idemtest_counters (name, n) VALUES ($1, 1)
		ON CONFLICT (name) DO UPDATE SET n = idemtest_counters.n + 1 RETURNING n`, name).Scan(&n)
	return n, err
}

func (c pgCounter) All(ctx context.Context) (map[string]int64, error) {
	rows, err := c.pool.Query(ctx, `SELECT name, n FROM idemtest_counters`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, rows.Err()
}

// MySQLCounter is a Counter on MariaDB/MySQL; it creates its table.
func MySQLCounter(t testing.TB, db *sql.DB) Counter {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE idemtest_counters (name VARBINARY(600) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	return myCounter{db}
}

type myCounter struct{ db *sql.DB }

func (c myCounter) Incr(ctx context.Context, name string) (int64, error) {
	// LAST_INSERT_ID(expr) hands the new value back on the same connection.
	res, err := c.db.ExecContext(ctx, `INSERT INTO idemtest_counters (name, n) VALUES (?, LAST_INSERT_ID(1))
		ON DUPLICATE KEY UPDATE n = LAST_INSERT_ID(n + 1)`, name)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (c myCounter) All(ctx context.Context) (map[string]int64, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT name, n FROM idemtest_counters`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, rows.Err()
}

// Clock is an injectable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed whole second (DynamoDB keeps expiry
// in seconds).
func NewClock() *Clock { return &Clock{t: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Handler is the suite's service: POST /orders increments the counter
// named "<tenant>/<key>" and answers 201 with a fresh random order id in
// the body, a Location (stored) and an X-Run header (not stored). With
// ?status=N it answers N instead (still counting), with a problem body.
// POST /slow waits for Gate before answering; POST /panic panics.
type Handler struct {
	Counter Counter
	Gate    chan struct{} // POST /slow waits for a value or close
	Entered chan struct{} // POST /slow sends here once it runs (buffered)
	Runs    atomic.Int64  // handler executions
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.Runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/panic":
		panic("idemtest: handler panics")
	case "/slow":
		if h.Entered != nil {
			h.Entered <- struct{}{}
		}
		select {
		case <-h.Gate:
		case <-r.Context().Done():
			return
		}
	}
	name := r.Header.Get("X-Tenant") + "/" + strings.Trim(r.Header.Get(idempotency.DefaultHeader), `"`)
	n, err := h.Counter.Incr(r.Context(), name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Effect", strconv.FormatInt(n, 10))
	id := randomID()
	w.Header().Set("X-Run", id)
	if s := r.URL.Query().Get("status"); s != "" {
		var code int
		_, _ = fmt.Sscan(s, &code)
		problem.Write(w, problem.Details{Status: code, Detail: "order " + id + " refused"})
		return
	}
	w.Header().Set("Location", "/orders/"+id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"order": id, "name": name, "request": string(body), "effect": n})
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// server wraps h in the middleware on env's store and serves it.
func server(t *testing.T, env Env, h http.Handler, cfg *idempotency.Config) *httptest.Server {
	t.Helper()
	mw, err := idempotency.Middleware(env.Store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	return srv
}

// result is a response as the client saw it.
type result struct {
	status   int
	replayed bool
	header   http.Header
	body     string
}

func (r result) String() string {
	return fmt.Sprintf("%d replayed=%v %q", r.status, r.replayed, r.body)
}

// post sends a POST with key (raw header value; "" sends none) and tenant.
func post(t *testing.T, c *http.Client, url, key, tenant, body string) result {
	t.Helper()
	r, err := send(t.Context(), c, url, key, tenant, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func send(ctx context.Context, c *http.Client, url, key, tenant, body string) (result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	if key != "" {
		req.Header.Set(idempotency.DefaultHeader, key)
	}
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	return result{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.ReplayHeader) == "true", header: resp.Header, body: string(b)}, nil
}

// isProblem checks a problem+json answer of status.
func isProblem(t *testing.T, r result, status int) {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != problem.ContentType || r.replayed {
		t.Fatalf("got %v (Content-Type %q), want a %d problem+json", r, r.header.Get("Content-Type"), status)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || p["status"] != float64(status) {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
}

func counts(t *testing.T, env Env) map[string]int64 {
	t.Helper()
	m, err := env.Counter.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rows(t *testing.T, env Env) int {
	t.Helper()
	n, err := env.Rows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Run runs the whole suite; newEnv returns a fresh Env for each subtest.
// storeLimit is the largest response the store cannot keep (see
// LargeResponses), 0 when it has no practical limit.
func Run(t *testing.T, newEnv func(t *testing.T) Env, storeLimit int) {
	t.Run("Conformance", func(t *testing.T) { Conformance(t, newEnv) })
	t.Run("Cancellation", func(t *testing.T) { Cancellation(t, newEnv) })
	t.Run("BadKeys", func(t *testing.T) { BadKeys(t, newEnv(t)) })
	t.Run("Expiry", func(t *testing.T) { Expiry(t, newEnv(t)) })
	t.Run("Reap", func(t *testing.T) { Reap(t, newEnv(t)) })
	t.Run("TakeOver", func(t *testing.T) { TakeOver(t, newEnv(t)) })
	t.Run("Do", func(t *testing.T) { Do(t, newEnv(t)) })
	t.Run("Concurrent", func(t *testing.T) { Concurrent(t, newEnv(t), 200, 8) })
	t.Run("ConcurrentClaims", func(t *testing.T) { ConcurrentClaims(t, newEnv(t).Store, 20, 8) })
	t.Run("StoreRoundTrip", func(t *testing.T) { StoreRoundTrip(t, newEnv(t)) })
	t.Run("ClientGivesUp", func(t *testing.T) { ClientGivesUp(t, newEnv(t), 200) })
	t.Run("ClaimCancelled", func(t *testing.T) { ClaimCancelled(t, newEnv(t), 300) })
	t.Run("LargeResponses", func(t *testing.T) { LargeResponses(t, newEnv, storeLimit) })
	t.Run("RateLimited", func(t *testing.T) { RateLimited(t, newEnv(t)) })
}

// StoreRoundTrip: a stored response comes back byte for byte through the
// Store interface — header values that are not UTF-8 or hold a NUL
// (which PostgreSQL's jsonb refuses as a string), a body of every byte.
func StoreRoundTrip(t *testing.T, env Env) {
	ctx := t.Context()
	now := NewClock().Now()
	req := idempotency.ClaimRequest{Key: "k1", Fingerprint: []byte("fp"), LockID: 7, Now: now, LockTimeout: time.Minute, TTL: time.Hour}
	if _, err := env.Store.Claim(ctx, req); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 256)
	for i := range body {
		body[i] = byte(i)
	}
	resp := idempotency.Response{Status: http.StatusCreated, Body: body, Header: http.Header{
		"Content-Disposition": {"attachment; filename=\"r\xe9sum\xe9.txt\""},
		"Location":            {"/a\x00b", "/c"},
		"Content-Type":        {"application/octet-stream"},
	}}
	if err := env.Store.Complete(ctx, idempotency.Lock{Key: "k1", ID: 7}, resp, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	req.LockID = 8
	rec, err := env.Store.Claim(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Response == nil || rec.Response.Status != resp.Status || !bytes.Equal(rec.Response.Body, body) || !reflect.DeepEqual(rec.Response.Header, resp.Header) {
		if rec.Response == nil {
			t.Fatalf("no response read back: %+v", rec)
		}
		t.Fatalf("stored status %d, headers %q; read back %d, %q (body equal: %v)", resp.Status, resp.Header,
			rec.Response.Status, rec.Response.Header, bytes.Equal(rec.Response.Body, body))
	}
}

// Conformance checks one rule of the IETF draft per subtest.
func Conformance(t *testing.T, newEnv func(t *testing.T) Env) {
	tenant := &idempotency.Config{Principal: idempotency.PrincipalHeader("X-Tenant")}
	t.Run("MissingKeyRequired400", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		srv := server(t, env, h, &idempotency.Config{Required: true})
		isProblem(t, post(t, srv.Client(), srv.URL+"/orders", "", "", "{}"), http.StatusBadRequest)
		if h.Runs.Load() != 0 || rows(t, env) != 0 {
			t.Fatalf("handler ran %d times, %d keys stored", h.Runs.Load(), rows(t, env))
		}
	})
	t.Run("MissingKeyOptionalPassesThrough", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		srv := server(t, env, h, nil)
		for range 2 {
			if r := post(t, srv.Client(), srv.URL+"/orders", "", "", "{}"); r.status != http.StatusCreated || r.replayed {
				t.Fatalf("got %v", r)
			}
		}
		if h.Runs.Load() != 2 || rows(t, env) != 0 {
			t.Fatalf("handler ran %d times, %d keys stored", h.Runs.Load(), rows(t, env))
		}
	})
	t.Run("ReusedKeyDifferentPayload422", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		srv := server(t, env, h, nil)
		if r := post(t, srv.Client(), srv.URL+"/orders", `"k1"`, "", `{"qty":1}`); r.status != http.StatusCreated {
			t.Fatalf("first: %v", r)
		}
		isProblem(t, post(t, srv.Client(), srv.URL+"/orders", `"k1"`, "", `{"qty":2}`), http.StatusUnprocessableEntity)
		// Same body, another target: another request too.
		isProblem(t, post(t, srv.Client(), srv.URL+"/orders?status=201", `"k1"`, "", `{"qty":1}`), http.StatusUnprocessableEntity)
		if h.Runs.Load() != 1 {
			t.Fatalf("handler ran %d times", h.Runs.Load())
		}
	})
	t.Run("InProgress409", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter, Gate: make(chan struct{}), Entered: make(chan struct{}, 1)}
		srv := server(t, env, h, nil)
		first := make(chan result, 1)
		go func() {
			r, err := send(t.Context(), srv.Client(), srv.URL+"/slow", "k1", "", "{}")
			if err != nil {
				t.Error(err)
			}
			first <- r
		}()
		<-h.Entered
		isProblem(t, post(t, srv.Client(), srv.URL+"/slow", "k1", "", "{}"), http.StatusConflict)
		close(h.Gate)
		r := <-first
		if r.status != http.StatusCreated || r.replayed {
			t.Fatalf("first: %v", r)
		}
		if again := post(t, srv.Client(), srv.URL+"/slow", "k1", "", "{}"); !again.replayed || again.body != r.body {
			t.Fatalf("after completion: %v, want a replay of %v", again, r)
		}
		if h.Runs.Load() != 1 {
			t.Fatalf("handler ran %d times", h.Runs.Load())
		}
	})
	t.Run("CompletedReplaysSuccess", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		srv := server(t, env, h, nil)
		first := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
		if first.status != http.StatusCreated || first.replayed || first.header.Get("X-Run") == "" {
			t.Fatalf("first: %v", first)
		}
		for range 2 {
			r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
			if !r.replayed || r.status != first.status || r.body != first.body {
				t.Fatalf("replay %v, want %v", r, first)
			}
			if r.header.Get("Location") != first.header.Get("Location") || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("replay headers %v, first %v", r.header, first.header)
			}
			if r.header.Get("X-Run") != "" {
				t.Fatalf("replay carries X-Run, a header not in Config.Headers: %v", r.header)
			}
		}
		if c := counts(t, env); c["/k1"] != 1 || h.Runs.Load() != 1 {
			t.Fatalf("counter %v, handler ran %d times", c, h.Runs.Load())
		}
	})
	for _, status := range []int{http.StatusPaymentRequired, http.StatusInternalServerError} {
		t.Run(fmt.Sprintf("CompletedReplaysFailure%d", status), func(t *testing.T) {
			env := newEnv(t)
			h := &Handler{Counter: env.Counter}
			srv := server(t, env, h, nil)
			url := fmt.Sprintf("%s/orders?status=%d", srv.URL, status)
			first := post(t, srv.Client(), url, "k1", "", "{}")
			if first.status != status || first.replayed {
				t.Fatalf("first: %v", first)
			}
			r := post(t, srv.Client(), url, "k1", "", "{}")
			if !r.replayed || r.status != status || r.body != first.body || r.header.Get("Content-Type") != problem.ContentType {
				t.Fatalf("replay %v, want %v", r, first)
			}
			if h.Runs.Load() != 1 {
				t.Fatalf("handler ran %d times", h.Runs.Load())
			}
		})
	}
	t.Run("ReplaysHeaderBytes", func(t *testing.T) {
		// Field values are bytes (RFC 9110 §5.5: obs-text 0x80-0xFF is
		// allowed); a Latin-1 filename is not valid UTF-8, and the replay
		// must carry the same bytes, not U+FFFD.
		env := newEnv(t)
		const disposition, location = "attachment; filename=\"r\xe9sum\xe9.txt\"", "/files/\xff\xfe"
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Disposition", disposition)
			w.Header().Set("Location", location)
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "created")
		})
		srv := server(t, env, h, nil)
		for i := range 2 {
			r := post(t, srv.Client(), srv.URL+"/files", "k1", "", "{}")
			if r.status != http.StatusCreated || r.replayed != (i == 1) {
				t.Fatalf("request %d: %v", i, r)
			}
			if got := r.header.Get("Content-Disposition"); got != disposition {
				t.Errorf("request %d (replayed %v): Content-Disposition %q, want %q", i, r.replayed, got, disposition)
			}
			if got := r.header.Get("Location"); got != location {
				t.Errorf("request %d (replayed %v): Location %q, want %q", i, r.replayed, got, location)
			}
		}
	})
	t.Run("AnotherPrincipalIndependent", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		srv := server(t, env, h, tenant)
		a := post(t, srv.Client(), srv.URL+"/orders", "k1", "acme", "{}")
		b := post(t, srv.Client(), srv.URL+"/orders", "k1", "globex", `{"other":"payload"}`)
		if a.status != http.StatusCreated || b.status != http.StatusCreated || a.replayed || b.replayed || a.body == b.body {
			t.Fatalf("two principals, one key: %v and %v", a, b)
		}
		if r := post(t, srv.Client(), srv.URL+"/orders", "k1", "acme", "{}"); !r.replayed || r.body != a.body {
			t.Fatalf("acme's replay %v, want %v", r, a)
		}
		isProblem(t, post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}"), http.StatusUnauthorized)
		if c := counts(t, env); c["acme/k1"] != 1 || c["globex/k1"] != 1 {
			t.Fatalf("counters %v", c)
		}
	})
	t.Run("QuotedAndBareAreOneKey", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		srv := server(t, env, h, nil)
		first := post(t, srv.Client(), srv.URL+"/orders", idempotency.FormatKey("k 1"), "", "{}")
		second := post(t, srv.Client(), srv.URL+"/orders", `"k 1"`, "", "{}")
		bare := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
		quoted := post(t, srv.Client(), srv.URL+"/orders", `"k1"`, "", "{}")
		if first.replayed || !second.replayed || bare.replayed || !quoted.replayed || quoted.body != bare.body {
			t.Fatalf("%v %v %v %v", first, second, bare, quoted)
		}
	})
	t.Run("SafeMethodsPassThrough", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		srv := server(t, env, h, &idempotency.Config{Required: true})
		for range 2 {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/orders", strings.NewReader("{}"))
			req.Header.Set(idempotency.DefaultHeader, "k1")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.ReplayHeader) != "" {
				t.Fatalf("PUT: %d %v", resp.StatusCode, resp.Header)
			}
		}
		if h.Runs.Load() != 2 || rows(t, env) != 0 {
			t.Fatalf("handler ran %d times, %d keys", h.Runs.Load(), rows(t, env))
		}
	})
	t.Run("PanicLeavesKeyRetryable", func(t *testing.T) {
		env := newEnv(t)
		var panics atomic.Bool
		panics.Store(true)
		inner := &Handler{Counter: env.Counter}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if panics.Load() {
				panic(http.ErrAbortHandler) // the server closes the connection quietly
			}
			inner.ServeHTTP(w, r)
		})
		srv := server(t, env, h, nil)
		if _, err := send(t.Context(), srv.Client(), srv.URL+"/orders", "k1", "", "{}"); err == nil {
			t.Fatal("the panicking request got a response")
		}
		panics.Store(false) // the server goroutine has finished: the client saw the connection close after it
		if r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}"); r.status != http.StatusCreated || r.replayed {
			t.Fatalf("retry after a panic: %v", r)
		}
	})
	t.Run("StoreDownStoresNothing503", func(t *testing.T) {
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		down := &flaky{Store: env.Store}
		down.fail.Store(true)
		srv := server(t, Env{Store: down}, h, nil)
		isProblem(t, post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}"), http.StatusServiceUnavailable)
		if h.Runs.Load() != 0 || rows(t, env) != 0 {
			t.Fatalf("handler ran %d times, %d keys", h.Runs.Load(), rows(t, env))
		}
		down.fail.Store(false)
		if r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}"); r.status != http.StatusCreated || r.replayed {
			t.Fatalf("once the store is back: %v", r)
		}
	})
}

// flaky is a Store whose Claim fails while fail is set.
type flaky struct {
	idempotency.Store
	fail atomic.Bool
}

func (f *flaky) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.Record, error) {
	if f.fail.Load() {
		return idempotency.Record{}, errors.New("idemtest: store down")
	}
	return f.Store.Claim(ctx, r)
}

// BadKeys: invalid keys are answered 400 problem+json and store nothing.
func BadKeys(t *testing.T, env Env) {
	h := &Handler{Counter: env.Counter}
	mw, err := idempotency.Middleware(env.Store, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mw(h)
	for name, values := range map[string][]string{
		"empty":          {""},
		"empty quoted":   {`""`},
		"10kB":           {strings.Repeat("k", 10<<10)},
		"10kB quoted":    {`"` + strings.Repeat("k", 10<<10) + `"`},
		"256 bytes":      {strings.Repeat("k", 256)},
		"control":        {"k\x01"},
		"DEL":            {"k\x7f"},
		"non-ASCII":      {"ключ"},
		"space in bare":  {"k 1"},
		"unclosed quote": {`"k1`},
		"bad escape":     {`"k\1"`},
		"parameters":     {`"k1";a=1`},
		"two headers":    {"k1", "k2"},
	} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/orders", strings.NewReader("{}"))
		req.Header[idempotency.DefaultHeader] = values
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		r := result{status: rec.Code, header: rec.Header(), body: rec.Body.String()}
		t.Run(name, func(t *testing.T) { isProblem(t, r, http.StatusBadRequest) })
	}
	if h.Runs.Load() != 0 || rows(t, env) != 0 {
		t.Fatalf("handler ran %d times, %d keys stored", h.Runs.Load(), rows(t, env))
	}
	// The longest valid key, in both forms, works.
	long := strings.Repeat("k", idempotency.DefaultMaxKeyLength)
	for _, v := range []string{long, `"` + long + `"`} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/orders", strings.NewReader("{}"))
		req.Header.Set(idempotency.DefaultHeader, v)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			t.Fatalf("key of %d bytes: %d %s", len(long), rec.Code, rec.Body)
		}
	}
	if n := rows(t, env); n != 1 {
		t.Fatalf("%d keys stored, want 1", n)
	}
}

// Expiry: a key is replayed until TTL after its last run, then it is a new
// key (another payload is accepted, the handler runs again).
func Expiry(t *testing.T, env Env) {
	clock := NewClock()
	h := &Handler{Counter: env.Counter}
	srv := server(t, env, h, &idempotency.Config{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now})
	first := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
	clock.Add(time.Hour - time.Second)
	if r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}"); !r.replayed || r.body != first.body {
		t.Fatalf("before expiry: %v, want a replay of %v", r, first)
	}
	isProblem(t, post(t, srv.Client(), srv.URL+"/orders", "k1", "", `{"new":1}`), http.StatusUnprocessableEntity)
	clock.Add(time.Second)
	r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", `{"new":1}`)
	if r.status != http.StatusCreated || r.replayed || r.body == first.body {
		t.Fatalf("after expiry: %v", r)
	}
	if again := post(t, srv.Client(), srv.URL+"/orders", "k1", "", `{"new":1}`); !again.replayed || again.body != r.body {
		t.Fatalf("replay of the new run: %v, want %v", again, r)
	}
	if c := counts(t, env); c["/k1"] != 2 {
		t.Fatalf("counter %v, want 2 runs", c)
	}
}

// Reap: the reaper deletes exactly the expired keys, in bounded batches,
// including a key whose run crashed (still locked); the crashed run's late
// result is then refused.
func Reap(t *testing.T, env Env) {
	ctx := t.Context()
	clock := NewClock()
	opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
	fn := func(context.Context) (int, error) { return 1, nil }
	for i := range 23 {
		if _, _, err := idempotency.Do(ctx, env.Store, "p", fmt.Sprintf("old-%d", i), nil, opts, fn); err != nil {
			t.Fatal(err)
		}
	}
	// A run that never finishes (its process crashed): the key stays
	// locked. It is expired after TTL all the same.
	entered, crash := make(chan struct{}), make(chan struct{})
	zombie := make(chan error, 1)
	go func() {
		_, _, err := idempotency.Do(ctx, env.Store, "p", "crashed", nil, opts, func(context.Context) (int, error) {
			close(entered)
			<-crash
			return 2, nil
		})
		zombie <- err
	}()
	<-entered
	clock.Add(30 * time.Minute)
	for i := range 5 {
		if _, _, err := idempotency.Do(ctx, env.Store, "p", fmt.Sprintf("new-%d", i), nil, opts, fn); err != nil {
			t.Fatal(err)
		}
	}
	if n := rows(t, env); n != 29 {
		t.Fatalf("%d keys before reaping, want 29", n)
	}
	if n, err := idempotency.Reap(ctx, env.Store, &idempotency.ReapOptions{BatchSize: 5, Now: clock.Now}); err != nil || n != 0 {
		t.Fatalf("nothing expired yet: reaped %d, %v", n, err)
	}
	clock.Add(30 * time.Minute) // the first 24 keys are TTL old
	if n, err := idempotency.Reap(ctx, env.Store, &idempotency.ReapOptions{BatchSize: 5, MaxBatches: 2, Now: clock.Now}); err != nil || n != 10 {
		t.Fatalf("two batches of 5: reaped %d, %v", n, err)
	}
	if n, err := idempotency.Reap(ctx, env.Store, &idempotency.ReapOptions{BatchSize: 5, Now: clock.Now}); err != nil || n != 14 {
		t.Fatalf("the rest: reaped %d, %v; want 14", n, err)
	}
	if n := rows(t, env); n != 5 {
		t.Fatalf("%d keys after reaping, want the 5 live ones", n)
	}
	close(crash)
	if err := <-zombie; !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("the crashed run's late result: %v, want ErrLockLost", err)
	}
	if _, err := idempotency.Reap(ctx, env.Store, &idempotency.ReapOptions{BatchSize: -1}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("negative batch: %v", err)
	}
}

// TakeOver: a run that holds the key past LockTimeout is presumed crashed;
// a retry takes the key over and runs again, and the late run's result is
// refused (fenced by the lock id), so the stored result is the retry's.
func TakeOver(t *testing.T, env Env) {
	ctx := t.Context()
	clock := NewClock()
	opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
	entered, finish := make(chan struct{}), make(chan struct{})
	late := make(chan error, 1)
	go func() {
		_, _, err := idempotency.Do(ctx, env.Store, "", "k1", []byte("req"), opts, func(context.Context) (string, error) {
			close(entered)
			<-finish
			return "late", nil
		})
		late <- err
	}()
	<-entered
	clock.Add(time.Minute - time.Second)
	run := func(context.Context) (string, error) { return "retry", nil }
	if _, _, err := idempotency.Do(ctx, env.Store, "", "k1", []byte("req"), opts, run); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("before the lock timeout: %v, want ErrInProgress", err)
	}
	if _, _, err := idempotency.Do(ctx, env.Store, "", "k1", []byte("other"), opts, run); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("another request: %v, want ErrKeyReused", err)
	}
	clock.Add(time.Second)
	v, replayed, err := idempotency.Do(ctx, env.Store, "", "k1", []byte("req"), opts, run)
	if err != nil || replayed || v != "retry" {
		t.Fatalf("take-over: %q %v %v", v, replayed, err)
	}
	close(finish)
	if err := <-late; !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("late run: %v, want ErrLockLost", err)
	}
	v, replayed, err = idempotency.Do(ctx, env.Store, "", "k1", []byte("req"), opts, run)
	if err != nil || !replayed || v != "retry" {
		t.Fatalf("replay: %q %v %v, want the retry's result", v, replayed, err)
	}
}

// Do: the programmatic API.
func Do(t *testing.T, env Env) {
	ctx := t.Context()
	type order struct {
		ID  string
		Qty int
	}
	runs := 0
	place := func(context.Context) (order, error) {
		runs++
		return order{ID: randomID(), Qty: 3}, nil
	}
	first, replayed, err := idempotency.Do(ctx, env.Store, "acme", "o1", []byte("qty=3"), nil, place)
	if err != nil || replayed {
		t.Fatal(first, replayed, err)
	}
	again, replayed, err := idempotency.Do(ctx, env.Store, "acme", "o1", []byte("qty=3"), nil, place)
	if err != nil || !replayed || again != first || runs != 1 {
		t.Fatalf("replay %v %v %v (runs %d), want %v", again, replayed, err, runs, first)
	}
	if _, _, err := idempotency.Do(ctx, env.Store, "acme", "o1", []byte("qty=4"), nil, place); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("other fingerprint: %v", err)
	}
	if _, replayed, err := idempotency.Do(ctx, env.Store, "globex", "o1", []byte("qty=4"), nil, place); err != nil || replayed || runs != 2 {
		t.Fatalf("other principal: %v %v", replayed, err)
	}

	// An error is not stored by default: the retry runs again.
	errDeclined := errors.New("card declined")
	calls := 0
	failOnce := func(context.Context) (int, error) {
		calls++
		if calls == 1 {
			return 0, errDeclined
		}
		return 42, nil
	}
	if _, _, err := idempotency.Do(ctx, env.Store, "", "e1", nil, nil, failOnce); !errors.Is(err, errDeclined) {
		t.Fatalf("first: %v", err)
	}
	if v, replayed, err := idempotency.Do(ctx, env.Store, "", "e1", nil, nil, failOnce); err != nil || replayed || v != 42 {
		t.Fatalf("retry after an error: %v %v %v", v, replayed, err)
	}
	// With StoreError the error is the result, replayed.
	keep := &idempotency.Options{StoreError: func(err error) bool { return errors.Is(err, errDeclined) }}
	calls = 0
	if _, _, err := idempotency.Do(ctx, env.Store, "", "e2", nil, keep, failOnce); !errors.Is(err, errDeclined) {
		t.Fatalf("first: %v", err)
	}
	_, replayed, err = idempotency.Do(ctx, env.Store, "", "e2", nil, keep, failOnce)
	if re, ok := errors.AsType[*idempotency.ReplayedError](err); !ok || !replayed || re.Message != errDeclined.Error() || calls != 1 {
		t.Fatalf("replayed error: %v %v (calls %d)", replayed, err, calls)
	}
	// A panic releases the key.
	func() {
		defer func() { _ = recover() }()
		_, _, _ = idempotency.Do(ctx, env.Store, "", "p1", nil, nil, func(context.Context) (int, error) { panic("boom") })
	}()
	if v, _, err := idempotency.Do(ctx, env.Store, "", "p1", nil, nil, func(context.Context) (int, error) { return 7, nil }); err != nil || v != 7 {
		t.Fatalf("after a panic: %v %v", v, err)
	}
	// Bad input, before any I/O.
	for _, c := range []struct {
		s              idempotency.Store
		principal, key string
		opts           *idempotency.Options
	}{
		{env.Store, "", "", nil},
		{env.Store, "", "k\n", nil},
		{env.Store, strings.Repeat("p", 256), "k", nil},
		{env.Store, "", "k", &idempotency.Options{TTL: time.Minute, LockTimeout: time.Hour}},
		{nil, "", "k", nil},
	} {
		if _, _, err := idempotency.Do(ctx, c.s, c.principal, c.key, nil, c.opts, place); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("Do(%q, %q, %+v): %v, want ErrInvalidArgument", c.principal, c.key, c.opts, err)
		}
	}
}

// Concurrent sends dups concurrent identical requests for each of keys
// keys, all released at once per key, with many keys in flight: each key's
// handler effect happens exactly once, and every duplicate gets the
// byte-identical stored response or 409. It logs the tally.
func Concurrent(t *testing.T, env Env, keys, dups int) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h := &Handler{Counter: env.Counter}
	srv := server(t, env, h, nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	const inFlight = 16 // keys at once: 16 × 8 concurrent requests
	results := make([][]result, keys)
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			key := fmt.Sprintf("key-%03d", k)
			results[k] = make([]result, dups)
			barrier := make(chan struct{})
			var dwg sync.WaitGroup
			for d := range dups {
				dwg.Add(1)
				go func() {
					defer dwg.Done()
					<-barrier
					r, err := send(ctx, client, srv.URL+"/orders", key, "", `{"item":"`+key+`"}`)
					if err != nil {
						t.Errorf("%s #%d: %v", key, d, err)
					}
					results[k][d] = r
				}()
			}
			close(barrier)
			dwg.Wait()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		return
	}
	c := counts(t, env)
	var firsts, replays, conflicts int
	for k := range keys {
		key := fmt.Sprintf("key-%03d", k)
		if n := c["/"+key]; n != 1 {
			t.Errorf("%s: handler effect applied %d times", key, n)
		}
		var original *result
		for i, r := range results[k] {
			switch {
			case r.status == http.StatusCreated && !r.replayed:
				if original != nil {
					t.Errorf("%s: two original responses: %v and %v", key, *original, r)
				}
				original = &results[k][i]
				firsts++
			case r.status == http.StatusConflict && r.header.Get("Content-Type") == problem.ContentType:
				conflicts++
			case r.status == http.StatusCreated && r.replayed:
				replays++
			default:
				t.Errorf("%s: unexpected response %v", key, r)
			}
		}
		if original == nil {
			t.Errorf("%s: no original response", key)
			continue
		}
		for _, r := range results[k] {
			if r.replayed && (r.body != original.body || r.header.Get("Location") != original.header.Get("Location")) {
				t.Errorf("%s: replay %v differs from the original %v", key, r, *original)
			}
		}
		// Once settled, every retry is the stored response.
		if r, err := send(ctx, client, srv.URL+"/orders", key, "", `{"item":"`+key+`"}`); err != nil || !r.replayed || !bytes.Equal([]byte(r.body), []byte(original.body)) {
			t.Errorf("%s: settled retry %v %v, want %v", key, r, err, *original)
		}
	}
	if h.Runs.Load() != int64(keys) {
		t.Errorf("handler ran %d times for %d keys", h.Runs.Load(), keys)
	}
	t.Logf("%d keys × %d concurrent duplicates in %v: %d originals, %d byte-identical replays, %d × 409; handler runs %d, effects %d",
		keys, dups, elapsed.Round(time.Millisecond), firsts, replays, conflicts, h.Runs.Load(), len(c))
}

// ConcurrentClaims: of concurrent claims of one key, exactly one runs fn.
// The keys are first released (fn failed once) or held by a run presumed
// crashed (its lock timed out), so that the claims update an existing
// row or item; dups calls per key are released together by a barrier,
// keys×2 keys at once.
func ConcurrentClaims(t *testing.T, s idempotency.Store, keys, dups int) {
	ctx := t.Context()
	clock := NewClock()
	opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
	errFirst := errors.New("first run fails")
	crashed := make(chan struct{})
	var holders sync.WaitGroup
	for k := range keys {
		released := fmt.Sprintf("released-%d", k)
		if _, _, err := idempotency.Do(ctx, s, "", released, nil, opts, func(context.Context) (int, error) { return 0, errFirst }); !errors.Is(err, errFirst) {
			t.Fatal(err)
		}
		entered := make(chan struct{})
		holders.Add(1)
		go func() { // a run that never ends: its process is gone
			defer holders.Done()
			_, _, _ = idempotency.Do(ctx, s, "", fmt.Sprintf("stale-%d", k), nil, opts, func(context.Context) (int, error) {
				close(entered)
				<-crashed
				return 0, nil
			})
		}()
		<-entered
	}
	clock.Add(time.Minute) // the crashed runs' locks time out
	var mu sync.Mutex
	runs, running, maxRunning := map[string]int{}, map[string]int{}, map[string]int{}
	var wg sync.WaitGroup
	for _, kind := range []string{"released", "stale"} {
		for k := range keys {
			key := fmt.Sprintf("%s-%d", kind, k)
			barrier := make(chan struct{})
			for range dups {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-barrier
					_, _, err := idempotency.Do(ctx, s, "", key, nil, opts, func(context.Context) (int, error) {
						mu.Lock()
						runs[key]++
						running[key]++
						maxRunning[key] = max(maxRunning[key], running[key])
						mu.Unlock()
						time.Sleep(20 * time.Millisecond) // a run long enough for the others to try
						mu.Lock()
						running[key]--
						mu.Unlock()
						return 1, nil
					})
					if err != nil && !errors.Is(err, idempotency.ErrInProgress) {
						t.Errorf("%s: %v", key, err)
					}
				}()
			}
			close(barrier)
		}
	}
	wg.Wait()
	close(crashed)
	holders.Wait()
	total := 0
	for _, kind := range []string{"released", "stale"} {
		for k := range keys {
			key := fmt.Sprintf("%s-%d", kind, k)
			total += runs[key]
			if runs[key] != 1 {
				t.Errorf("%s: fn ran %d times (at most %d at once), want once", key, runs[key], maxRunning[key])
			}
		}
	}
	t.Logf("%d keys × %d concurrent claims: fn ran %d times", 2*keys, dups, total)
}
