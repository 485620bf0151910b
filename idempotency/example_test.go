package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitpg"
)

// The examples keep their keys in the PostgreSQL server of
// scripts/services.sh (or CONCURKIT_POSTGRES_URL), each in a schema of its
// own with the toolkit migrations applied, dropped afterwards. They print
// an error and return when the server is missing, instead of log.Fatal.

// examplePool returns a pool on a fresh schema holding the key table, and
// a function that drops the schema.
func examplePool(ctx context.Context, schema string) (*pgxpool.Pool, func(), error) {
	base := os.Getenv("CONCURKIT_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, nil, err
	}
	q := pgx.Identifier{schema}.Sanitize()
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+q+" CASCADE")
		_ = admin.Close(context.WithoutCancel(ctx))
	}
	if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+q+" CASCADE; CREATE SCHEMA "+q); err != nil {
		drop()
		return nil, nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return nil, nil, errors.New("CONCURKIT_POSTGRES_URL is not a URL")
	}
	v := u.Query()
	v.Set("options", "-csearch_path="+schema)
	u.RawQuery = v.Encode()
	if err := migrations.Up(ctx, migrations.Postgres, u.String()); err != nil {
		drop()
		return nil, nil, err
	}
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		drop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); drop() }, nil
}

func ExampleMiddleware() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx, "ck_example_idem_middleware")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	store, err := idempotencypg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	orders := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		orders++ // the effect that must happen once
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, orders)
	})
	mw, err := idempotency.Middleware(store, &idempotency.Config{
		Principal: idempotency.PrincipalHeader("X-Account"), // set by your authentication
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(mw(mux))
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("X-Account", "acme")
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), strings.TrimSpace(string(b)))
	}
	post(`"5b1e0c2a"`, `{"sku":"A-1"}`) // runs the handler
	post(`"5b1e0c2a"`, `{"sku":"A-1"}`) // a retry: the stored response
	post(`"5b1e0c2a"`, `{"sku":"B-2"}`) // the same key for another request
	fmt.Println("orders placed:", orders)
	// Output:
	// 201  {"order":1}
	// 201 true {"order":1}
	// 422  {"detail":"This Idempotency-Key was used with a different request.","status":422,"title":"Unprocessable Entity","type":"about:blank"}
	// orders placed: 1
}

// A client that gives up does not stop its request: the handler runs to
// completion (its context does not end with the client's), and the
// client's retry with the same key gets 409 while it runs, then its
// response.
func ExampleMiddleware_clientGivesUp() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx, "ck_example_idem_gives_up")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	store, err := idempotencypg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	mw, err := idempotency.Middleware(store, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	running, clientGone := make(chan struct{}), make(chan struct{})
	charges := 0
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(running)
		<-clientGone // a slow payment provider; meanwhile the client gives up
		charges++    // in a real service: a write with r.Context(), still live
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d,"context":%v}`, charges, r.Context().Err())
	})))
	defer srv.Close()

	post := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Idempotency-Key", `"c-7"`)
		return srv.Client().Do(req)
	}
	cctx, giveUp := context.WithCancel(ctx)
	go func() { <-running; giveUp(); close(clientGone) }()
	if _, err := post(cctx); err != nil {
		fmt.Println("first attempt: gave up")
	}
	for {
		resp, err := post(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusConflict {
			time.Sleep(10 * time.Millisecond) // still running: retry later
			continue
		}
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b))
		break
	}
	fmt.Println("charges:", charges)
	// Output:
	// first attempt: gave up
	// 201 true {"charge":1,"context":<nil>}
	// charges: 1
}

// The order with a rate limiter: the idempotency middleware outside, the
// limiter inside, next to the handler. A replay never reaches the limiter
// (it costs no quota and is never refused), and a 429 means the request did
// not run: it is not stored, so the same key runs once the quota is back.
func ExampleMiddleware_rateLimit() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx, "ck_example_idem_ratelimit")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	store, err := idempotencypg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC) // the limiter's clock, moved below
	limiter, err := ratelimitpg.New(pool, &ratelimitpg.Config{Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	limit, err := ratelimit.Middleware(limiter, &ratelimit.Config{
		Limit: ratelimit.Limit{Rate: 1, Period: time.Minute},
		Key:   func(r *http.Request) string { return r.Header.Get("X-Account") },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	idem, err := idempotency.Middleware(store, &idempotency.Config{Principal: idempotency.PrincipalHeader("X-Account")})
	if err != nil {
		fmt.Println(err)
		return
	}
	orders := 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, orders)
	})
	srv := httptest.NewServer(idem(limit(handler))) // idempotency outside, the limiter inside
	defer srv.Close()

	post := func(key string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"sku":"A-1"}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("X-Account", "acme")
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusTooManyRequests {
			b = []byte("Retry-After: " + resp.Header.Get("Retry-After"))
		}
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b))
	}
	post(`"a"`) // runs, using the quota of one per minute
	post(`"a"`) // a retry: the stored response, no quota used
	post(`"b"`) // refused by the limiter: not stored
	now = now.Add(time.Minute)
	post(`"b"`) // the quota is back: runs
	fmt.Println("orders placed:", orders)
	// Output:
	// 201  {"order":1}
	// 201 true {"order":1}
	// 429  Retry-After: 60
	// 201  {"order":2}
	// orders placed: 2
}

func ExampleDo() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx, "ck_example_idem_do")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	store, err := idempotencypg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	type Refund struct {
		ID     string
		Amount int
	}
	refunds := 0
	refund := func(ctx context.Context) (Refund, error) {
		refunds++
		return Refund{ID: fmt.Sprint("re_", refunds), Amount: 1200}, nil
	}
	// A job that may run twice (a queue redelivers its message): the
	// message id is the key, its payload the fingerprint.
	for range 2 {
		r, replayed, err := idempotency.Do(ctx, store, "billing", "msg-81f3", []byte("refund order 42"), nil, refund)
		fmt.Println(r, replayed, err)
	}
	fmt.Println("refunds made:", refunds)
	// Output:
	// {re_1 1200} false <nil>
	// {re_1 1200} true <nil>
	// refunds made: 1
}

func ExampleDoPhases() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx, "ck_example_idem_phases")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	if _, err := pool.Exec(ctx, `CREATE TABLE rides (key text PRIMARY KEY, charge text)`); err != nil {
		fmt.Println(err)
		return
	}
	store, err := idempotencypg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	timeout := true // the payment provider's answer is lost, once
	phases := []idempotency.Phase[pgx.Tx]{
		{Name: "ride_created", Run: func(ctx context.Context, tx pgx.Tx, st idempotency.Step) error {
			fmt.Println("create ride")
			_, err := tx.Exec(ctx, `INSERT INTO rides (key) VALUES ($1)`, st.Key)
			return err
		}},
		{Name: "charged", Run: func(ctx context.Context, tx pgx.Tx, st idempotency.Step) error {
			// The provider's own idempotency key: a repeated charge is one charge.
			fmt.Println("charge with key", st.DerivedKey())
			if timeout {
				timeout = false
				return errors.New("payment provider timed out")
			}
			_, err := tx.Exec(ctx, `UPDATE rides SET charge = 'ch_1' WHERE key = $1`, st.Key)
			return err
		}},
	}
	receipt := func(ctx context.Context, tx pgx.Tx, st idempotency.Step) (string, error) {
		var charge string
		err := tx.QueryRow(ctx, `SELECT charge FROM rides WHERE key = $1`, st.Key).Scan(&charge)
		return "receipt for " + charge, err
	}
	for range 3 {
		r, replayed, err := idempotency.DoPhases(ctx, store, "rider-7", "ride-1", []byte("A to B"), nil, phases, receipt)
		fmt.Printf("%q %v %v\n", r, replayed, err)
	}
	// Output:
	// create ride
	// charge with key ride-1:charged
	// "" false payment provider timed out
	// charge with key ride-1:charged
	// "receipt for ch_1" false <nil>
	// "receipt for ch_1" true <nil>
}

func ExampleReap() {
	ctx := context.Background()
	pool, cleanup, err := examplePool(ctx, "ck_example_idem_reap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	store, err := idempotencypg.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, key := range []string{"a", "b", "c"} {
		if _, _, err := idempotency.Do(ctx, store, "", key, nil, &idempotency.Options{Now: clock},
			func(context.Context) (bool, error) { return true, nil }); err != nil {
			fmt.Println(err)
			return
		}
	}
	now = now.Add(idempotency.DefaultTTL) // in production: a ticker, every few minutes
	n, err := idempotency.Reap(ctx, store, &idempotency.ReapOptions{BatchSize: 2, Now: clock})
	fmt.Println("reaped", n, err)
	// Output: reaped 3 <nil>
}

func ExampleParseKey() {
	for _, v := range []string{`"8e03978e-40d5"`, `8e03978e-40d5`, `"a \"quoted\" key"`, ``, "k\x01"} {
		key, err := idempotency.ParseKey(v, 0)
		fmt.Printf("%q %v\n", key, errors.Is(err, idempotency.ErrInvalidKey))
	}
	// Output:
	// "8e03978e-40d5" false
	// "8e03978e-40d5" false
	// "a \"quoted\" key" false
	// "" true
	// "" true
}

func ExampleFormatKey() {
	fmt.Println(idempotency.FormatKey(`8e03978e-40d5`))
	fmt.Println(idempotency.FormatKey(`say "hi"`))
	// Output:
	// "8e03978e-40d5"
	// "say \"hi\""
}

func ExampleFingerprint() {
	a := idempotency.Fingerprint([]byte("refund"), []byte("order 42"))
	b := idempotency.Fingerprint([]byte("refund order"), []byte(" 42"))
	fmt.Println(len(a), string(a) == string(b))
	// Output: 32 false
}

func ExamplePrincipalHeader() {
	principal := idempotency.PrincipalHeader("X-Account")
	r := httptest.NewRequest(http.MethodPost, "/orders", nil)
	_, err := principal(r)
	fmt.Println(err)
	r.Header.Set("X-Account", "acme")
	fmt.Println(principal(r))
	// Output:
	// idempotency: no X-Account header
	// acme <nil>
}
