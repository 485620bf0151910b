package idempotencypg_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// TestCrashRecovery: the process serving a request dies mid-way — here
// its only connection is terminated (pg_terminate_backend) while the
// handler's transaction is open, so neither the handler's write nor the
// stored response can commit. The key stays locked; a retry gets 409
// until the lock timeout (injected clock), then runs the handler again,
// and the effect happens exactly once.
func TestCrashRecovery(t *testing.T) {
	ctx := t.Context()
	url, pool := migrated(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (id int PRIMARY KEY, n int NOT NULL); INSERT INTO effects VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	clock := idemtest.NewClock()
	cfg := &idempotency.Config{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	reached, proceed := make(chan struct{}, 1), make(chan struct{})
	handler := func(db idempotencypg.Beginner, crash bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx, err := db.Begin(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(r.Context())) }()
			var n int
			if err := tx.QueryRow(r.Context(), `UPDATE effects SET n = n + 1 WHERE id = 1 RETURNING n`).Scan(&n); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if crash {
				reached <- struct{}{}
				<-proceed
			}
			if err := tx.Commit(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "effect applied, n="+strings.Repeat("I", n))
		})
	}
	serve := func(db idempotencypg.DBTX, h http.Handler) *httptest.Server {
		s, err := idempotencypg.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		mw, err := idempotency.Middleware(s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mw(h))
		t.Cleanup(srv.Close)
		return srv
	}
	post := func(srv *httptest.Server) (int, string, bool) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader("{}"))
		req.Header.Set(idempotency.DefaultHeader, `"order-1"`)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get(idempotency.ReplayHeader) == "true"
	}

	// The crashing process: one connection for its store and its handler.
	conn := testkit.PostgresConn(t, url)
	crashing := serve(conn, handler(conn, true))
	first := make(chan int, 1)
	go func() { code, _, _ := post(crashing); first <- code }()
	<-reached
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, conn.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if code := <-first; code != http.StatusInternalServerError {
		t.Fatalf("the crashed request answered %d", code)
	}
	var locked bool
	var stored *int
	if err := pool.QueryRow(ctx, `SELECT locked_at IS NOT NULL, response_status FROM concurkit_idempotency_keys WHERE idempotency_key = 'order-1'`).Scan(&locked, &stored); err != nil || !locked || stored != nil {
		t.Fatalf("after the crash: locked %v, stored %v, %v; want locked, nothing stored", locked, stored, err)
	}

	healthy := serve(pool, handler(pool, false))
	if code, body, _ := post(healthy); code != http.StatusConflict {
		t.Fatalf("retry within the lock timeout: %d %s, want 409", code, body)
	}
	clock.Add(time.Minute)
	code, body, replayed := post(healthy)
	if code != http.StatusCreated || replayed {
		t.Fatalf("retry after the lock timeout: %d %s", code, body)
	}
	code2, body2, replayed2 := post(healthy)
	if code2 != code || body2 != body || !replayed2 {
		t.Fatalf("replay %d %q %v, want %d %q", code2, body2, replayed2, code, body)
	}
	var n, attempts int
	if err := pool.QueryRow(ctx, `SELECT (SELECT n FROM effects), (SELECT attempts FROM concurkit_idempotency_keys)`).Scan(&n, &attempts); err != nil || n != 1 || attempts != 2 {
		t.Fatalf("effect applied %d times, %d runs of the key (%v); want 1 and 2", n, attempts, err)
	}
}
