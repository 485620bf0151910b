package idempotencymysql_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
)

// countingDB counts the statements sent through it. Being no *sql.DB, it
// makes the store run its writes with plain ExecContext (no KILL QUERY
// guard), which costs the same round trips.
type countingDB struct {
	*sql.DB
	n atomic.Int64
}

func (c *countingDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.n.Add(1)
	return c.DB.ExecContext(ctx, q, args...)
}

func (c *countingDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.n.Add(1)
	return c.DB.QueryContext(ctx, q, args...)
}

func (c *countingDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.n.Add(1)
	return c.DB.QueryRowContext(ctx, q, args...)
}

// BenchmarkMiddleware is idempotencypg's benchmark on MariaDB: the
// middleware's cost per request, in process, for a new key (first) and a
// stored one (replay), against the bare handler.
func BenchmarkMiddleware(b *testing.B) {
	_, sqlDB := migrated(b)
	db := &countingDB{DB: sqlDB}
	s, err := idempotencymysql.New(db, nil)
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
	serve := func(b *testing.B, h http.Handler, key string) {
		req := httptest.NewRequestWithContext(b.Context(), http.MethodPost, "/orders", strings.NewReader(`{"items":[{"sku":"A-1","qty":2}]}`))
		if key != "" {
			req.Header.Set(idempotency.DefaultHeader, key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	run := func(name string, h http.Handler, key func(run string, i int) string) {
		b.Run(name, func(b *testing.B) {
			db.n.Store(0)
			// -count runs a sub-benchmark again in the same process: new keys
			// for each run.
			runID := strconv.FormatInt(time.Now().UnixNano(), 36)
			i := 0
			for b.Loop() {
				serve(b, h, key(runID, i))
				i++
			}
			b.ReportMetric(float64(db.n.Load())/float64(i), "round-trips/op")
		})
	}
	run("bare", handler, func(string, int) string { return "" })
	run("first", wrapped, func(run string, i int) string { return run + "-" + strconv.Itoa(i) })
	serve(b, wrapped, "replayed")
	run("replay", wrapped, func(string, int) string { return "replayed" })
}
