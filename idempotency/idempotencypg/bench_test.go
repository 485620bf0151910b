package idempotencypg_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
)

// BenchmarkMiddleware measures what the middleware adds to a request, in
// process (no network between client and server), on real PostgreSQL:
// bare is the handler alone; first is a new key each time (claim, handler,
// store the response); replay is the same key again (one claim that finds
// the stored response). round-trips/op counts the statements sent to
// PostgreSQL through the store's handle.
func BenchmarkMiddleware(b *testing.B) {
	_, pool := migrated(b)
	db := &countingDB{DBTX: pool}
	s, err := idempotencypg.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"order":1,"status":"placed","items":[{"sku":"A-1","qty":2}]}`))
	})
	mw, err := idempotency.Middleware(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	wrapped := mw(handler)
	body := `{"items":[{"sku":"A-1","qty":2}]}`
	serve := func(b *testing.B, h http.Handler, key string, want int) {
		req := httptest.NewRequestWithContext(b.Context(), http.MethodPost, "/orders", strings.NewReader(body))
		if key != "" {
			req.Header.Set(idempotency.DefaultHeader, key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	run := func(name string, h http.Handler, key func(run string, i int) string) {
		b.Run(name, func(b *testing.B) {
			db.reset()
			// -count runs a sub-benchmark again in the same process: new keys
			// for each run.
			runID := strconv.FormatInt(time.Now().UnixNano(), 36)
			i := 0
			for b.Loop() {
				serve(b, h, key(runID, i), http.StatusCreated)
				i++
			}
			n, _ := db.reset()
			b.ReportMetric(float64(n)/float64(i), "round-trips/op")
		})
	}
	run("bare", handler, func(string, int) string { return "" })
	run("first", wrapped, func(run string, i int) string { return run + "-" + strconv.Itoa(i) })
	serve(b, wrapped, "replayed", http.StatusCreated)
	run("replay", wrapped, func(string, int) string { return "replayed" })
}
