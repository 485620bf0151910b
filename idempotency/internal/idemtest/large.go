package idemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
)

// notStored checks a retry's answer: the 410 marker of a response that
// could not be stored, whose first run answered status (and location).
func notStored(t *testing.T, r result, status int, location string) {
	t.Helper()
	isProblem(t, result{status: r.status, header: r.header, body: r.body}, http.StatusGone)
	var p struct {
		Type     string
		Original int    `json:"original-status"`
		Location string `json:"original-location"`
	}
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || p.Type != idempotency.ResponseNotStoredType || p.Original != status || p.Location != location {
		t.Fatalf("marker %s (%v), want original-status %d, location %q", r.body, err, status, location)
	}
}

// LargeResponses: a completed run whose response cannot be stored — over
// Config.MaxResponseBytes, or over what the store keeps (storeLimit bytes,
// 0 for a store without a practical limit) — never runs again: its key
// keeps a marker, and retries get 410 Gone, also after the lock timeout.
// The client of the run gets the whole response, streamed beyond
// MaxResponseBytes, so the middleware's memory stays bounded.
func LargeResponses(t *testing.T, newEnv func(t *testing.T) Env, storeLimit int) {
	quiet := slog.New(slog.DiscardHandler)
	// body writes n bytes of a repeated pattern in chunks of 4 KiB.
	body := func(w io.Writer, n int) {
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 256)
		for n > 0 {
			k := min(n, len(chunk))
			_, _ = w.Write(chunk[:k])
			n -= k
		}
	}
	run := func(t *testing.T, env Env, cfg *idempotency.Config, clock *Clock, size int) {
		t.Helper()
		var runs atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs.Add(1)
			w.Header().Set("Location", "/reports/1")
			w.WriteHeader(http.StatusCreated)
			body(w, size)
		})
		cfg.TTL, cfg.LockTimeout, cfg.Now, cfg.Logger = time.Hour, time.Minute, clock.Now, quiet
		srv := server(t, env, h, cfg)
		first := post(t, srv.Client(), srv.URL+"/reports", "k1", "", "{}")
		var want bytes.Buffer
		body(&want, size)
		if first.status != http.StatusCreated || first.replayed || first.body != want.String() || first.header.Get("Location") != "/reports/1" {
			t.Fatalf("first: %d replayed=%v, %d bytes (want %d)", first.status, first.replayed, len(first.body), size)
		}
		notStored(t, post(t, srv.Client(), srv.URL+"/reports", "k1", "", "{}"), http.StatusCreated, "/reports/1")
		clock.Add(2 * time.Minute) // past the lock timeout: a key left locked would run again now
		notStored(t, post(t, srv.Client(), srv.URL+"/reports", "k1", "", "{}"), http.StatusCreated, "/reports/1")
		if n := runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times", n)
		}
		if n, err := env.Locked(t.Context()); err != nil || n != 0 {
			t.Fatalf("%d keys locked (%v)", n, err)
		}
	}
	t.Run("OverMaxResponseBytes", func(t *testing.T) {
		run(t, newEnv(t), &idempotency.Config{MaxResponseBytes: 64 << 10}, NewClock(), 300<<10)
	})
	t.Run("BoundedMemory", func(t *testing.T) {
		// 64 MiB through the default Config (1 MiB buffered at most): the
		// process allocates a small part of it. The client discards what
		// it reads.
		env := newEnv(t)
		const size = 64 << 20
		chunk := bytes.Repeat([]byte{'x'}, 32<<10)
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			for n := 0; n < size; n += len(chunk) {
				_, _ = w.Write(chunk)
			}
		})
		srv := server(t, env, h, &idempotency.Config{Logger: quiet})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/reports", strings.NewReader("{}"))
		req.Header.Set(idempotency.DefaultHeader, "k1")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("a %d MiB response allocated %.1f MiB", size>>20, float64(allocated)/(1<<20))
		if err != nil || n != size || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d: %d bytes, %v", resp.StatusCode, n, err)
		}
		if allocated > 16<<20 {
			t.Errorf("a %d MiB response allocated %d MiB: it was buffered", size>>20, allocated>>20)
		}
		notStored(t, post(t, srv.Client(), srv.URL+"/reports", "k1", "", "{}"), http.StatusOK, "")
	})
	if storeLimit == 0 {
		return
	}
	t.Run("OverStoreLimit", func(t *testing.T) {
		// Within MaxResponseBytes, over what the store keeps.
		run(t, newEnv(t), &idempotency.Config{MaxResponseBytes: int64(2 * storeLimit)}, NewClock(), storeLimit)
	})
	t.Run("DoOverStoreLimit", func(t *testing.T) {
		env := newEnv(t)
		ctx := t.Context()
		clock := NewClock()
		opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
		runs := 0
		fn := func(context.Context) (string, error) { runs++; return strings.Repeat("a", storeLimit), nil }
		v, replayed, err := idempotency.Do(ctx, env.Store, "", "k1", nil, opts, fn)
		if err != nil || replayed || len(v) != storeLimit {
			t.Fatalf("first: %d bytes, replayed=%v, %v", len(v), replayed, err)
		}
		for range 2 {
			if _, replayed, err := idempotency.Do(ctx, env.Store, "", "k1", nil, opts, fn); !errors.Is(err, idempotency.ErrResponseTooLarge) || !replayed {
				t.Fatalf("retry: replayed=%v %v, want ErrResponseTooLarge", replayed, err)
			}
			clock.Add(2 * time.Minute) // past the lock timeout
		}
		if runs != 1 {
			t.Fatalf("fn ran %d times", runs)
		}
	})
}
