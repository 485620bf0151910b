package idemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
)

// Observed is a Store that records the life of every lock: a claim that
// got its key opens a lock, a Complete or Release that succeeds (or finds
// the lock gone) closes it. A claim that gets a key while another lock of
// it is still open is a take-over: the other run was blocked past the lock
// timeout, or its lock was orphaned. A claim that fails may have been
// applied: its lock stays open until a Release of it succeeds.
type Observed struct {
	idempotency.Store
	mu          sync.Mutex
	open        map[string]map[int64]bool // key -> lock ids
	takeovers   []string
	claimErrors []string
}

// Observe wraps s.
func Observe(s idempotency.Store) *Observed {
	return &Observed{Store: s, open: map[string]map[int64]bool{}}
}

func lockKey(principal, key string) string { return principal + "\x00" + key }

// Claim implements idempotency.Store.
func (o *Observed) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.Record, error) {
	rec, err := o.Store.Claim(ctx, r)
	o.mu.Lock()
	defer o.mu.Unlock()
	k := lockKey(r.Principal, r.Key)
	if o.open[k] == nil {
		o.open[k] = map[int64]bool{}
	}
	switch {
	case err != nil:
		o.claimErrors = append(o.claimErrors, fmt.Sprintf("%s: %v", r.Key, err))
		o.open[k][r.LockID] = true // maybe applied
	case rec.LockID == r.LockID && !rec.LockedAt.IsZero():
		if len(o.open[k]) > 0 {
			o.takeovers = append(o.takeovers, fmt.Sprintf("%s (attempt %d)", r.Key, rec.Attempts))
		}
		o.open[k] = map[int64]bool{r.LockID: true}
	}
	return rec, err
}

func (o *Observed) closed(l idempotency.Lock, err error) {
	if err != nil && !errors.Is(err, idempotency.ErrLockLost) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.open[lockKey(l.Principal, l.Key)], l.ID)
}

// Complete implements idempotency.Store.
func (o *Observed) Complete(ctx context.Context, l idempotency.Lock, resp idempotency.Response, expiresAt time.Time) error {
	err := o.Store.Complete(ctx, l, resp, expiresAt)
	if !errors.Is(err, idempotency.ErrResponseTooLarge) {
		o.closed(l, err)
	}
	return err
}

// Release implements idempotency.Store.
func (o *Observed) Release(ctx context.Context, l idempotency.Lock) error {
	err := o.Store.Release(ctx, l)
	o.closed(l, err)
	return err
}

// Report returns the take-overs, the failed claims, and the keys with a
// lock still open.
func (o *Observed) Report() (takeovers, claimErrors, open []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, ids := range o.open {
		if len(ids) > 0 {
			open = append(open, strings.ReplaceAll(k, "\x00", "/"))
		}
	}
	sort.Strings(open)
	return o.takeovers, o.claimErrors, open
}

// effectHandler is a service whose one effect per request is the
// counter "/<key>", incremented in a transaction of its own after a
// random 0-2 ms of work; it answers 201 with {"effect": <the counter's
// new value>}. It honours its context: a request whose context ended
// before the effect gets 500.
type effectHandler struct {
	counter Counter
	runs    atomic.Int64
}

func (h *effectHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.runs.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-time.After(time.Duration(rand.IntN(2000)) * time.Microsecond):
	case <-r.Context().Done():
		http.Error(w, r.Context().Err().Error(), http.StatusInternalServerError)
		return
	}
	n, err := h.counter.Incr(r.Context(), "/"+strings.Trim(r.Header.Get(idempotency.DefaultHeader), `"`))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"effect":%d}`, n)
}

// effectOf reads the effect a 201 reports; -1 for any other answer.
func effectOf(r result) int64 {
	var body struct{ Effect int64 }
	if r.status != http.StatusCreated || json.Unmarshal([]byte(r.body), &body) != nil {
		return -1
	}
	return body.Effect
}

// giveUpAfter is when a client gives up: in half of the requests 0.2 to
// 3 ms into the request (while the claim is on its way or running), in
// the other half anywhere in its first 20 ms (the handler, the answer).
func giveUpAfter() time.Duration {
	if rand.IntN(2) == 0 {
		return 200*time.Microsecond + time.Duration(rand.Int64N(int64(2800*time.Microsecond)))
	}
	return time.Duration(rand.Int64N(int64(20 * time.Millisecond)))
}

// ClientGivesUp: a client sends a request and gives up at a random point
// (giveUpAfter: before it is sent, while the key is claimed, while the
// handler runs, while the answer comes back), then retries with the same
// key until it gets an answer other than 409. Whatever the point, every
// key's final answer is the response of its one run, whose effect
// committed: 201 with effect 1, the key's counter at 1. None is a stored
// error of a run that never committed (poisoned), nor an empty 200; no
// key stays locked; no claim takes a lock over; no key answers 409 longer
// than a run may take (9/10 of the lock timeout).
func ClientGivesUp(t *testing.T, env Env, keys int) {
	const lockTimeout = 5 * time.Second
	obs := Observe(env.Store)
	h := &effectHandler{counter: env.Counter}
	mw, err := idempotency.Middleware(obs, &idempotency.Config{TTL: time.Minute, LockTimeout: lockTimeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(h))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	type outcome struct {
		first    string // what the client that gave up saw
		final    result
		conflict time.Duration // how long the retries got 409
	}
	out := make([]outcome, keys)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			key := fmt.Sprintf("key-%04d", k)
			cctx, stop := context.WithTimeout(ctx, giveUpAfter())
			r, err := send(cctx, client, srv.URL+"/orders", key, "", "{}")
			stop()
			if err != nil {
				out[k].first = "gave up"
			} else {
				out[k].first = fmt.Sprint(r.status)
			}
			var since time.Time
			for {
				r, err := send(ctx, client, srv.URL+"/orders", key, "", "{}")
				if err != nil {
					t.Errorf("%s: retry: %v", key, err)
					return
				}
				if r.status != http.StatusConflict {
					out[k].final = r
					if !since.IsZero() {
						out[k].conflict = time.Since(since)
					}
					return
				}
				if since.IsZero() {
					since = time.Now()
				}
				time.Sleep(5 * time.Millisecond) // a client polling a 409
			}
		}()
	}
	wg.Wait()
	srv.Close() // waits for the handlers of the requests that gave up
	if t.Failed() {
		return
	}
	c := counts(t, env)
	firsts := map[string]int{}
	var maxConflict time.Duration
	for k := range keys {
		key := fmt.Sprintf("key-%04d", k)
		o := out[k]
		firsts[o.first]++
		maxConflict = max(maxConflict, o.conflict)
		if n := c["/"+key]; n != 1 || effectOf(o.final) != n {
			t.Errorf("%s (first attempt: %s): final answer %v; effect committed %d times", key, o.first, o.final, n)
		}
		if o.conflict > lockTimeout*9/10 {
			t.Errorf("%s: answered 409 for %v, longer than a run may take: its lock outlived its run", key, o.conflict.Round(time.Millisecond))
		}
	}
	takeovers, claimErrors, open := obs.Report()
	if len(takeovers) > 0 || len(claimErrors) > 0 || len(open) > 0 {
		t.Errorf("take-overs %q; failed claims %q; locks still open %q", takeovers, claimErrors, open)
	}
	if n, err := env.Locked(t.Context()); err != nil || n != 0 {
		t.Errorf("%d keys still locked (%v)", n, err)
	}
	if runs := h.runs.Load(); runs != int64(keys) {
		t.Errorf("the handler ran %d times for %d keys", runs, keys)
	}
	t.Logf("%d keys; first attempts: %v; handler runs %d; longest 409 streak %v",
		keys, firsts, h.runs.Load(), maxConflict.Round(time.Millisecond))
}

// ClaimCancelled: Do calls whose context ends 0.2 to 3 ms after they
// start — mostly while the claim's statement is in flight — leave no key
// locked: a claim is either never sent, or awaited and then released when
// its caller has gone. Afterwards every key runs or replays at once.
func ClaimCancelled(t *testing.T, env Env, calls int) {
	ctx := t.Context()
	obs := Observe(env.Store)
	opts := &idempotency.Options{TTL: time.Minute, LockTimeout: 5 * time.Second}
	fn := func(key string) func(ctx context.Context) (int64, error) {
		return func(ctx context.Context) (int64, error) { return env.Counter.Incr(ctx, "/"+key) }
	}
	errs := map[string]int{}
	var mu sync.Mutex
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range calls {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			key := fmt.Sprintf("call-%04d", i)
			cctx, cancel := context.WithTimeout(ctx, 200*time.Microsecond+time.Duration(rand.Int64N(int64(2800*time.Microsecond))))
			_, _, err := idempotency.Do(cctx, obs, "", key, nil, opts, fn(key))
			cancel()
			mu.Lock()
			switch {
			case err == nil:
				errs["ok"]++
			case errors.Is(err, context.DeadlineExceeded):
				errs["deadline exceeded"]++
			default:
				errs[err.Error()]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	locked, err := env.Locked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	takeovers, claimErrors, open := obs.Report()
	t.Logf("%d calls cancelled 0.2-3 ms in: %v; %d keys locked afterwards, %d failed claims", calls, errs, locked, len(claimErrors))
	if locked != 0 || len(open) > 0 || len(takeovers) > 0 {
		t.Errorf("%d keys locked after their calls returned (locks open %q, take-overs %q)", locked, open, takeovers)
	}
	for i := range calls {
		key := fmt.Sprintf("call-%04d", i)
		if _, _, err := idempotency.Do(ctx, env.Store, "", key, nil, opts, fn(key)); err != nil {
			t.Errorf("%s, afterwards: %v", key, err)
		}
	}
}

// Cancellation checks, one per subtest, the middleware's contract when
// the client gives up or the handler's time runs out.
func Cancellation(t *testing.T, newEnv func(t *testing.T) Env) {
	quiet := slog.New(slog.DiscardHandler)
	t.Run("HandlerOutlivesClient", func(t *testing.T) {
		// The client disconnects while the handler runs (the server has
		// seen it: the request's own context ended); the handler's context
		// is still live, its effect commits and its response is stored:
		// the retry gets it, and the handler does not run again.
		env := newEnv(t)
		mw, err := idempotency.Middleware(env.Store, &idempotency.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		clientGone := make(chan (<-chan struct{}), 1)
		entered := make(chan struct{})
		var runs atomic.Int64
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			close(entered)
			<-<-clientGone // the server saw the client leave
			if err := r.Context().Err(); err != nil {
				http.Error(w, "handler context ended with the client: "+err.Error(), http.StatusInternalServerError)
				return
			}
			n, err := env.Counter.Incr(r.Context(), "/k1")
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"effect":%d}`, n)
		})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if runs.Load() == 0 {
				clientGone <- r.Context().Done() // the first request's, as the server sees the client
			}
			mw(inner).ServeHTTP(w, r)
		}))
		defer srv.Close()
		ctx, cancel := context.WithCancel(t.Context())
		first := make(chan error, 1)
		go func() { _, err := send(ctx, srv.Client(), srv.URL+"/orders", "k1", "", "{}"); first <- err }()
		<-entered
		cancel()
		if err := <-first; err == nil {
			t.Fatal("the client that gave up got an answer")
		}
		var r result
		for r = post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}"); r.status == http.StatusConflict; r = post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}") {
			time.Sleep(5 * time.Millisecond) // a client polling a 409
		}
		if !r.replayed || effectOf(r) != 1 || runs.Load() != 1 || counts(t, env)["/k1"] != 1 {
			t.Fatalf("retry: %v (runs %d, counter %v), want the replay of effect 1", r, runs.Load(), counts(t, env))
		}
	})
	t.Run("GoneBeforeClaim", func(t *testing.T) {
		// A request whose client is gone before the claim claims nothing
		// and runs nothing.
		env := newEnv(t)
		h := &Handler{Counter: env.Counter}
		mw, err := idempotency.Middleware(env.Store, &idempotency.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader("{}"))
		req.Header.Set(idempotency.DefaultHeader, "k1")
		mw(h).ServeHTTP(httptest.NewRecorder(), req)
		if h.Runs.Load() != 0 || rows(t, env) != 0 {
			t.Fatalf("handler ran %d times, %d keys", h.Runs.Load(), rows(t, env))
		}
	})
	// The handler's context ends at 9/10 of the lock timeout after the
	// claim. A handler still running then cannot say what it did: nothing
	// is stored, the key is released, and the retry runs the handler.
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   int // what the client gets
	}{
		{"NoAnswer", func(http.ResponseWriter) {}, http.StatusServiceUnavailable},
		{"ErrorAfterDeadline", func(w http.ResponseWriter) {
			http.Error(w, "context deadline exceeded", http.StatusInternalServerError)
		}, http.StatusInternalServerError},
		{"EmptyOKAfterDeadline", func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }, http.StatusOK},
	} {
		t.Run("Deadline"+c.name, func(t *testing.T) {
			env := newEnv(t)
			var runs atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					<-r.Context().Done()
					c.answer(w)
					return
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, "second run")
			})
			srv := server(t, env, h, &idempotency.Config{TTL: time.Minute, LockTimeout: 300 * time.Millisecond, Logger: quiet})
			first := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
			if first.status != c.want || first.replayed {
				t.Fatalf("first: %v, want %d", first, c.want)
			}
			if n, err := env.Locked(t.Context()); err != nil || n != 0 {
				t.Fatalf("%d keys locked (%v): the key was not released", n, err)
			}
			r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
			if r.status != http.StatusCreated || r.replayed || r.body != "second run" || runs.Load() != 2 {
				t.Fatalf("retry: %v (runs %d), want a second run", r, runs.Load())
			}
		})
	}
	t.Run("DecidedBeforeDeadline", func(t *testing.T) {
		// A handler that answered while its context was live is believed,
		// even if it returns after the deadline: its response is stored.
		env := newEnv(t)
		var runs atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.WriteHeader(http.StatusCreated)
			<-r.Context().Done()
			_, _ = io.WriteString(w, "created")
		})
		srv := server(t, env, h, &idempotency.Config{TTL: time.Minute, LockTimeout: 300 * time.Millisecond, Logger: quiet})
		first := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
		r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
		if first.status != http.StatusCreated || !r.replayed || r.body != "created" || runs.Load() != 1 {
			t.Fatalf("first %v, retry %v (runs %d)", first, r, runs.Load())
		}
	})
	t.Run("EmptyOKStored", func(t *testing.T) {
		// A handler that returns without writing, its context live,
		// answered an empty 200 (net/http's default): that is stored.
		env := newEnv(t)
		var runs atomic.Int64
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) })
		srv := server(t, env, h, &idempotency.Config{Logger: quiet})
		first := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
		r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
		if first.status != http.StatusOK || r.status != http.StatusOK || !r.replayed || r.body != "" || runs.Load() != 1 {
			t.Fatalf("first %v, retry %v (runs %d)", first, r, runs.Load())
		}
	})
	t.Run("NotExecutedReleased", func(t *testing.T) {
		// 429 and 503 mean the request did not execute: sent, not stored,
		// the key released.
		for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			env := newEnv(t)
			var runs atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if runs.Add(1) == 1 {
					w.Header().Set("Retry-After", "1")
					http.Error(w, "not now", status)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})
			srv := server(t, env, h, &idempotency.Config{Logger: quiet})
			first := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
			r := post(t, srv.Client(), srv.URL+"/orders", "k1", "", "{}")
			if first.status != status || r.status != http.StatusCreated || r.replayed || runs.Load() != 2 {
				t.Fatalf("%d: first %v, retry %v (runs %d), want the retry to run", status, first, r, runs.Load())
			}
		}
	})
}
