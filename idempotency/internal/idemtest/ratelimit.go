package idemtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/concurkit/concurkit/migrations"
	_ "github.com/concurkit/concurkit/migrations/migrationspg" // the migrations' PostgreSQL driver
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitpg"
	"github.com/concurkit/concurkit/testkit"
)

// RateLimited: ratelimit's middleware inside the idempotency middleware,
// the documented order, with its counts in PostgreSQL (ratelimitpg). A
// replay never reaches the limiter: it consumes no quota and is never
// refused. A 429 is not stored: the key is released, and the same key runs
// once the quota is back.
func RateLimited(t *testing.T, env Env) {
	url := testkit.PostgresURL(t)
	if err := migrations.Up(t.Context(), migrations.Postgres, url); err != nil {
		t.Fatal(err)
	}
	clock := NewClock()
	limiter, err := ratelimitpg.New(testkit.PostgresPoolFor(t, url), &ratelimitpg.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	limit, err := ratelimit.Middleware(limiter, &ratelimit.Config{
		Limit: ratelimit.Limit{Rate: 2, Period: time.Minute},
		Key:   func(*http.Request) string { return "client-1" },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Counter: env.Counter}
	srv := server(t, env, limit(h), nil)
	c := srv.Client()
	first := post(t, c, srv.URL+"/orders", "k1", "", "{}")
	if first.status != http.StatusCreated || first.replayed {
		t.Fatalf("k1: %v", first)
	}
	for range 3 {
		if r := post(t, c, srv.URL+"/orders", "k1", "", "{}"); !r.replayed || r.body != first.body {
			t.Fatalf("k1 replay: %v, want %v", r, first)
		}
	}
	// The replays consumed nothing: the second unit of quota is there.
	if r := post(t, c, srv.URL+"/orders", "k2", "", "{}"); r.status != http.StatusCreated || r.replayed {
		t.Fatalf("k2 after three replays of k1: %v, want it to run", r)
	}
	for range 2 {
		r := post(t, c, srv.URL+"/orders", "k3", "", "{}")
		if r.status != http.StatusTooManyRequests || r.replayed || r.header.Get("Retry-After") == "" {
			t.Fatalf("k3 over the quota: %v, want the limiter's own 429 (not a replay)", r)
		}
	}
	clock.Add(time.Minute) // the quota is back
	if r := post(t, c, srv.URL+"/orders", "k3", "", "{}"); r.status != http.StatusCreated || r.replayed {
		t.Fatalf("k3 once the quota is back: %v, want it to run", r)
	}
	if n := counts(t, env); n["/k1"] != 1 || n["/k2"] != 1 || n["/k3"] != 1 || h.Runs.Load() != 3 {
		t.Fatalf("effects %v, handler runs %d", n, h.Runs.Load())
	}
}
