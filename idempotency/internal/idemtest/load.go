package idemtest

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
)

// loadDuration is how long Load sends requests: a few seconds in go test
// (CI); longer on demand, e.g. go test -run Load ./idempotency/... -args
// -idem.duration=2m.
var loadDuration = flag.Duration("idem.duration", 3*time.Second, "how long each idemtest.Load run sends requests")

// LoadConfig shapes Load; zero fields take the defaults in brackets.
type LoadConfig struct {
	Clients     int           // concurrent clients [16]
	MaxDups     int           // concurrent duplicates of one request, 1 to MaxDups [3]
	TimeoutRate float64       // share of requests whose client gives up [0.05]
	LockTimeout time.Duration // [5s]
}

// Load is the exactly-once load test of the middleware over env's store:
// Clients clients each send requests under fresh keys, every request as 1
// to MaxDups concurrent duplicates; a TimeoutRate share of all requests
// (duplicates and retries included) gives up at a random point, up to
// twice the mean latency; a client retries a key whose answer it did not
// get, or got 409 or 503, until it gets another. The handler's effect is a
// counter per key, incremented in a transaction of its own. It runs for
// -idem.duration (3 s by default), then checks, for every key:
//
//   - the effect committed exactly once;
//   - its final answer is the response of that effect (201, effect 1), and
//     every 201 any client saw for it is the same response;
//   - no client saw a stored error (a replayed answer other than 201: a
//     poisoned key);
//   - no key was blocked past one lock timeout: no claim took a lock over
//     (the previous run was still holding it, or its lock was orphaned),
//     no lock is left open or locked in the store.
func Load(t *testing.T, env Env, cfg LoadConfig) {
	if cfg.Clients == 0 {
		cfg.Clients = 16
	}
	if cfg.MaxDups == 0 {
		cfg.MaxDups = 3
	}
	if cfg.TimeoutRate == 0 {
		cfg.TimeoutRate = 0.05
	}
	if cfg.LockTimeout == 0 {
		cfg.LockTimeout = 5 * time.Second
	}
	obs := Observe(env.Store)
	h := &effectHandler{counter: env.Counter}
	mw, err := idempotency.Middleware(obs, &idempotency.Config{TTL: time.Hour, LockTimeout: cfg.LockTimeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(h))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Clients * cfg.MaxDups}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(t.Context(), *loadDuration+2*time.Minute)
	defer cancel()

	// keyLog is what the clients saw for one key.
	type keyLog struct {
		key      string
		answers  []result // every answer, in no particular order
		final    result
		conflict time.Duration // from the first 409 to the final answer
	}
	var (
		mu        sync.Mutex
		logs      []*keyLog
		requests  atomic.Int64
		gaveUp    atomic.Int64
		latencyNs atomic.Int64 // running mean of answered requests
	)
	// one sends one request, giving up at a random point in a TimeoutRate
	// share of the requests; ok is false when the client gave up.
	one := func(key string) (result, bool) {
		requests.Add(1)
		rctx := ctx
		if rand.Float64() < cfg.TimeoutRate {
			mean := max(time.Duration(latencyNs.Load()), 100*time.Microsecond)
			var stop context.CancelFunc
			rctx, stop = context.WithTimeout(ctx, time.Duration(rand.Int64N(int64(2*mean))))
			defer stop()
		}
		start := time.Now()
		r, err := send(rctx, client, srv.URL+"/orders", key, "", "{}")
		if err != nil {
			if ctx.Err() == nil && rctx.Err() == nil {
				t.Errorf("%s: %v", key, err)
			}
			gaveUp.Add(1)
			return r, false
		}
		d := int64(time.Since(start))
		latencyNs.Store((latencyNs.Load()*31 + d) / 32)
		return r, true
	}
	retryable := func(r result, ok bool) bool {
		return !ok || r.status == http.StatusConflict || r.status == http.StatusServiceUnavailable
	}
	deadline := time.Now().Add(*loadDuration)
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; time.Now().Before(deadline) && ctx.Err() == nil; seq++ {
				kl := &keyLog{key: fmt.Sprintf("c%02d-%05d", c, seq)}
				mu.Lock()
				logs = append(logs, kl)
				mu.Unlock()
				// The duplicates, at once.
				dups := 1 + rand.IntN(cfg.MaxDups)
				answers := make([]result, dups)
				oks := make([]bool, dups)
				var dwg sync.WaitGroup
				for d := range dups {
					dwg.Add(1)
					go func() { defer dwg.Done(); answers[d], oks[d] = one(kl.key) }()
				}
				dwg.Wait()
				var firstConflict time.Time // the first 409 for the key
				last, lastOK := answers[0], oks[0]
				for d := range dups {
					if oks[d] {
						kl.answers = append(kl.answers, answers[d])
						if answers[d].status == http.StatusConflict && firstConflict.IsZero() {
							firstConflict = time.Now()
						}
					}
					if !retryable(answers[d], oks[d]) {
						last, lastOK = answers[d], true
					}
				}
				// Retries until an answer that is not "try again".
				for retryable(last, lastOK) && ctx.Err() == nil {
					time.Sleep(time.Duration(2+rand.IntN(8)) * time.Millisecond) // a client's backoff
					last, lastOK = one(kl.key)
					if lastOK {
						kl.answers = append(kl.answers, last)
						if last.status == http.StatusConflict && firstConflict.IsZero() {
							firstConflict = time.Now()
						}
					}
				}
				kl.final = last
				if !firstConflict.IsZero() {
					kl.conflict = time.Since(firstConflict)
				}
			}
		}()
	}
	wg.Wait()
	srv.Close() // waits for the handlers of requests whose clients gave up
	if t.Failed() {
		return
	}

	c := counts(t, env)
	var poisoned, wrong, replays, conflicts int
	var maxConflict time.Duration
	for _, kl := range logs {
		maxConflict = max(maxConflict, kl.conflict)
		n := c["/"+kl.key]
		if n != 1 || effectOf(kl.final) != 1 {
			wrong++
			if wrong <= 10 {
				t.Errorf("%s: effect committed %d times; final answer %v", kl.key, n, kl.final)
			}
		}
		for _, r := range kl.answers {
			switch {
			case r.replayed && r.status != http.StatusCreated:
				poisoned++
				if poisoned <= 10 {
					t.Errorf("%s: a stored error was replayed: %v (effect committed %d times)", kl.key, r, n)
				}
			case r.status == http.StatusCreated && r.body != kl.final.body:
				wrong++
				t.Errorf("%s: two different 201s: %v and %v", kl.key, r, kl.final)
			case r.replayed:
				replays++
			case r.status == http.StatusConflict:
				conflicts++
			}
		}
		if kl.conflict >= cfg.LockTimeout {
			t.Errorf("%s: answered 409 for %v, a whole lock timeout (its holder's run ends at 9/10 of it)", kl.key, kl.conflict.Round(time.Millisecond))
		}
	}
	takeovers, claimErrors, open := obs.Report()
	if len(takeovers) > 0 || len(open) > 0 {
		t.Errorf("blocked past the lock timeout: take-overs %q; locks still open %q", takeovers[:min(len(takeovers), 10)], open[:min(len(open), 10)])
	}
	if n, err := env.Locked(t.Context()); err != nil || n != 0 {
		t.Errorf("%d keys still locked (%v)", n, err)
	}
	if total := len(c); total != len(logs) {
		t.Errorf("%d keys, %d effects", len(logs), total)
	}
	slices.Sort(claimErrors)
	t.Logf("%v: %d keys, %d requests (%.0f/s), %d gave up; handler runs %d; %d replays, %d × 409 (longest wait %v); "+
		"failed claims %d; poisoned %d, wrong %d; mean latency %v",
		loadDuration.String(), len(logs), requests.Load(), float64(requests.Load())/loadDuration.Seconds(), gaveUp.Load(),
		h.runs.Load(), replays, conflicts, maxConflict.Round(time.Millisecond), len(claimErrors), poisoned, wrong,
		time.Duration(latencyNs.Load()).Round(10*time.Microsecond))
	if len(claimErrors) > 0 {
		t.Logf("failed claims (answered 503, retried): %q", claimErrors[:min(len(claimErrors), 5)])
	}
}
