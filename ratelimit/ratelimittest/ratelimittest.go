// Package ratelimittest is the conformance suite of the ratelimit.Limiter
// contract: one set of tests that ratelimitredis and ratelimitpg pass, and
// that a Limiter of your own can be checked against from your own tests:
//
//	func TestMyLimiter(t *testing.T) {
//		ratelimittest.Run(t, func(t *testing.T, a ratelimit.Algorithm, now func() time.Time) ratelimit.Limiter {
//			return newMyLimiter(t, a, now) // a new client or connection, as another server would have
//		}, nil)
//	}
//
// Run covers exactness under concurrency (Options.Clients independent
// limiters, goroutines standing in for servers, released together by a
// barrier, hit one key: a fixed window admits exactly its quota per window,
// GCRA exactly its burst at once and exactly one request per emission
// interval after that, and every Remaining value is handed out once; the
// same through ratelimit.Middleware on one HTTP server per limiter),
// windows rolling over on an injected clock (no sleeping), a server whose
// clock lags counting into the newer window, agreement of
// every decision field with the reference model on a random sequence of
// calls, key isolation (keys differing only in '{', '}', '%' or Unicode),
// bad input, and cancellation.
//
// It is meant for tests (it imports testing).
package ratelimittest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/internal/spec"
)

// Factory returns a new Limiter of algorithm a that reads the time from
// now, on a client or connection of its own, as another server would
// have. Run calls it many times per test; the Factory registers its own
// cleanup with t.Cleanup.
type Factory func(t *testing.T, a ratelimit.Algorithm, now func() time.Time) ratelimit.Limiter

// Options tune Run. Nil or zero fields mean the defaults.
type Options struct {
	// Clients is the number of independent limiters of the exactness
	// tests. Default 10.
	Clients int
	// Quota is the limit L of the exactness tests. Default 100.
	Quota int64
	// Windows is how many windows (or bursts) the exactness tests run,
	// moving the clock between them. Default 4.
	Windows int
	// ModelCalls is the length of the sequence compared with the
	// reference model, per algorithm. Default 300.
	ModelCalls int
}

func (o *Options) resolve() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Clients <= 0 {
		r.Clients = 10
	}
	if r.Quota <= 0 {
		r.Quota = 100
	}
	if r.Windows <= 0 {
		r.Windows = 4
	}
	if r.ModelCalls <= 0 {
		r.ModelCalls = 300
	}
	return r
}

// Clock is a manual clock for tests, safe for concurrent use. Its Now is
// what a Config.Now takes.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock that reads t until moved.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Key returns a fresh key for one test: the test's name and random
// characters, so that tests sharing a server never share a key.
func Key(t testing.TB) string {
	return strings.NewReplacer("/", ":", " ", "_").Replace(t.Name()) + ":" + rand.Text()[:10]
}

// epoch is where the suite's clocks start: a whole minute, so that
// windows of a minute or less start exactly there.
var epoch = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// Run runs the suite against the Limiters f returns.
func Run(t *testing.T, f Factory, opts *Options) {
	o := opts.resolve()
	t.Run("FixedWindowExact", func(t *testing.T) { fixedWindowExact(t, f, o) })
	t.Run("GCRABurstExact", func(t *testing.T) { gcraBurstExact(t, f, o) })
	t.Run("Model", func(t *testing.T) {
		for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
			t.Run(a.String(), func(t *testing.T) { model(t, f, a, o) })
		}
	})
	t.Run("MiddlewareExact", func(t *testing.T) { middlewareExact(t, f, o) })
	t.Run("LaggingClock", func(t *testing.T) { laggingClock(t, f) })
	t.Run("KeysIsolated", func(t *testing.T) { keysIsolated(t, f) })
	t.Run("BadInput", func(t *testing.T) { badInput(t, f) })
	t.Run("Cancelled", func(t *testing.T) { cancelled(t, f) })
}

// Burst is the outcome of one barrier-released burst of calls.
type Burst struct {
	Allowed   int     // calls admitted
	Denied    int     // calls refused
	Remaining []int64 // Remaining of every admitted call, sorted
}

// Hit releases one goroutine per limiter together (a barrier) and has each
// make calls calls of cost 1 on key with limit, one after another; it
// returns what they got. An error fails the test.
func Hit(t testing.TB, limiters []ratelimit.Limiter, key string, limit ratelimit.Limit, calls int) Burst {
	t.Helper()
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		mu          sync.Mutex
		out         Burst
		errs        []error
	)
	for _, l := range limiters {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-start
			for range calls {
				d, err := l.AllowN(context.Background(), key, limit, 1)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case d.Allowed:
					out.Allowed++
					out.Remaining = append(out.Remaining, d.Remaining)
				default:
					out.Denied++
					if d.RetryAfter <= 0 {
						errs = append(errs, fmt.Errorf("denied with RetryAfter %v", d.RetryAfter))
					}
				}
				mu.Unlock()
			}
		})
	}
	ready.Wait()
	close(start)
	done.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
	}
	slices.Sort(out.Remaining)
	return out
}

// limiters returns n independent limiters of algorithm a on clock.
func limiters(t *testing.T, f Factory, a ratelimit.Algorithm, clock *Clock, n int) []ratelimit.Limiter {
	t.Helper()
	ls := make([]ratelimit.Limiter, n)
	for i := range ls {
		ls[i] = f(t, a, clock.Now)
	}
	return ls
}

// countdown returns [0, 1, …, n-1]: the Remaining values n admitted calls
// must have got, each once, if each saw the count the one before it left.
func countdown(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

func fixedWindowExact(t *testing.T, f Factory, o Options) {
	clock := NewClock(epoch.Add(7 * time.Second))
	ls := limiters(t, f, ratelimit.FixedWindow, clock, o.Clients)
	key := Key(t)
	limit := ratelimit.Limit{Rate: o.Quota, Period: time.Minute}
	calls := int(3*o.Quota)/o.Clients + 1 // 3×L attempts per window in all
	for w := range o.Windows {
		// 7 s into window w (windows are aligned to the Unix epoch).
		b := Hit(t, ls, key, limit, calls)
		t.Logf("window %d: %d clients, %d attempts: %d allowed, %d denied (limit %d)", w, o.Clients, o.Clients*calls, b.Allowed, b.Denied, o.Quota)
		if int64(b.Allowed) != o.Quota {
			t.Fatalf("window %d: %d allowed, want exactly %d", w, b.Allowed, o.Quota)
		}
		if !slices.Equal(b.Remaining, countdown(o.Quota)) {
			t.Fatalf("window %d: Remaining values %v, want each of 0…%d once", w, b.Remaining, o.Quota-1)
		}
		// Later in the same window: still nothing, and the wait is what
		// is left of the window.
		clock.Advance(45 * time.Second)
		d, err := ls[0].AllowN(context.Background(), key, limit, 1)
		if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter != 8*time.Second || d.ResetAfter != 8*time.Second {
			t.Fatalf("window %d: a call 45 s later: %+v, %v; want denied, retry and reset after 8 s", w, d, err)
		}
		// The window ends at the next whole minute, not 60 s after the
		// first call: 8 s later, the next window starts.
		clock.Advance(8 * time.Second)
		if w == o.Windows-1 {
			d, err := ls[0].AllowN(context.Background(), key, limit, 1)
			if err != nil || !d.Allowed || d.Remaining != o.Quota-1 || d.ResetAfter != time.Minute {
				t.Fatalf("first call of the next window: %+v, %v; want allowed, %d remaining, reset after 1m", d, err, o.Quota-1)
			}
			return
		}
		clock.Advance(7 * time.Second)
	}
}

func gcraBurstExact(t *testing.T, f Factory, o Options) {
	clock := NewClock(epoch)
	ls := limiters(t, f, ratelimit.GCRA, clock, o.Clients)
	key := Key(t)
	burst := o.Quota
	// T = 1 s / (2 L): a whole number of microseconds for the defaults.
	limit := ratelimit.Limit{Rate: 2 * o.Quota, Period: time.Second, Burst: burst}
	emission := time.Second / time.Duration(2*o.Quota)
	calls := int(3*burst)/o.Clients + 1
	b := Hit(t, ls, key, limit, calls)
	t.Logf("burst: %d clients, %d attempts at one instant: %d allowed (burst %d)", o.Clients, o.Clients*calls, b.Allowed, burst)
	if int64(b.Allowed) != burst || !slices.Equal(b.Remaining, countdown(burst)) {
		t.Fatalf("burst at one instant: %d allowed with Remaining %v, want exactly %d, each of 0…%d once", b.Allowed, b.Remaining, burst, burst-1)
	}
	for w := 1; w <= o.Windows; w++ {
		// k emission intervals later, exactly k more, however many ask.
		k := int64(w) * 3
		clock.Advance(time.Duration(k) * emission)
		b := Hit(t, ls, key, limit, int(k))
		t.Logf("after %d intervals: %d allowed", k, b.Allowed)
		if int64(b.Allowed) != k {
			t.Fatalf("after %d emission intervals: %d allowed, want exactly %d", k, b.Allowed, k)
		}
	}
	// A full drain gives the whole burst back.
	clock.Advance(time.Duration(burst) * emission)
	if b := Hit(t, ls, key, limit, calls); int64(b.Allowed) != burst {
		t.Fatalf("after a full drain: %d allowed, want %d", b.Allowed, burst)
	}
}

// model compares every decision with spec.Model on a random sequence of
// calls on a few keys, with the clock moving by random steps.
func model(t *testing.T, f Factory, a ratelimit.Algorithm, o Options) {
	clock := NewClock(epoch.Add(123456789 * time.Microsecond))
	l := f(t, a, clock.Now)
	// One limit per key, with periods and rates whose microseconds do not
	// divide evenly.
	limits := []ratelimit.Limit{
		{Rate: 5, Period: time.Second},
		{Rate: 7, Period: 1500 * time.Millisecond},  // GCRA: T = 214286 µs, rounded up
		{Rate: 3, Period: 250*time.Millisecond + 1}, // Period rounded up to 250001 µs
	}
	if a == ratelimit.GCRA {
		limits = append(limits, ratelimit.Limit{Rate: 2, Period: time.Second, Burst: 6})
	}
	keys := make([]string, len(limits))
	for i := range keys {
		keys[i] = Key(t)
	}
	seed := mrand.Uint64()
	rng := mrand.New(mrand.NewPCG(seed, 0))
	var m spec.Model
	allowed := 0
	for i := range o.ModelCalls {
		ki := rng.IntN(len(keys))
		limit := limits[ki]
		if rng.IntN(3) == 0 {
			clock.Advance(time.Duration(rng.Int64N(int64(limit.Period))))
		}
		capacity := limit.Rate
		if a == ratelimit.GCRA && limit.Burst != 0 {
			capacity = limit.Burst
		}
		n := 1 + rng.Int64N(min(capacity, 3))
		c, err := spec.Prepare("model", a, keys[ki], limit, n, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		want := m.Decide(keys[ki], c)
		got, err := l.AllowN(context.Background(), keys[ki], limit, n)
		if err != nil {
			t.Fatalf("seed %d, call %d: %v", seed, i, err)
		}
		if got != want {
			t.Fatalf("seed %d, call %d (key %d, limit %v, n %d, t+%v): got %+v, want %+v", seed, i, ki, limit, n, clock.Now().Sub(epoch), got, want)
		}
		if got.Allowed {
			allowed++
		}
	}
	t.Logf("seed %d: %d of %d calls allowed, every decision equal to the model's", seed, allowed, o.ModelCalls)
	if allowed == 0 || allowed == o.ModelCalls {
		t.Fatalf("%d of %d calls allowed: the sequence tests nothing", allowed, o.ModelCalls)
	}
}

// middlewareExact puts one HTTP server per limiter, each with
// ratelimit.Middleware in front of its handler, and has one client per
// server send its share of 3×L requests at once: exactly L get 200, the
// others 429 with Retry-After, per window.
func middlewareExact(t *testing.T, f Factory, o Options) {
	clock := NewClock(epoch.Add(time.Second))
	limit := ratelimit.Limit{Rate: o.Quota, Period: time.Minute}
	key := Key(t)
	urls := make([]string, o.Clients)
	var served atomic.Int64
	for i := range urls {
		mw, err := ratelimit.Middleware(f(t, ratelimit.FixedWindow, clock.Now), &ratelimit.Config{
			Limit: limit, Key: func(*http.Request) string { return key }})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			served.Add(1)
			w.WriteHeader(http.StatusOK)
		})))
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	calls := int(3*o.Quota)/o.Clients + 1
	for w := range 2 {
		served.Store(0)
		var (
			ready, done sync.WaitGroup
			start       = make(chan struct{})
			mu          sync.Mutex
			codes       = map[int]int{}
			errs        []error
		)
		for _, u := range urls {
			ready.Add(1)
			done.Go(func() {
				c := &http.Client{Transport: &http.Transport{}} // a connection of its own
				defer c.CloseIdleConnections()
				ready.Done()
				<-start
				for range calls {
					resp, err := c.Get(u)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else {
						codes[resp.StatusCode]++
						if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
							errs = append(errs, errors.New("429 without Retry-After"))
						}
						_ = resp.Body.Close()
					}
					mu.Unlock()
				}
			})
		}
		ready.Wait()
		close(start)
		done.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d requests failed, first: %v", len(errs), errs[0])
		}
		t.Logf("window %d: %d servers, %d requests: %v (limit %d)", w, o.Clients, o.Clients*calls, codes, o.Quota)
		if int64(codes[http.StatusOK]) != o.Quota || served.Load() != o.Quota || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != o.Clients*calls {
			t.Fatalf("window %d: status codes %v, handler ran %d times; want exactly %d × 200, the rest 429", w, codes, served.Load(), o.Quota)
		}
		clock.Advance(time.Minute)
	}
}

// laggingClock: a server whose clock lags counts into the newer window it
// finds instead of starting an older one again.
func laggingClock(t *testing.T, f Factory) {
	key := Key(t)
	limit := ratelimit.Limit{Rate: 2, Period: time.Minute}
	late := epoch.Add(59 * time.Second)
	ahead := f(t, ratelimit.FixedWindow, func() time.Time { return late.Add(2 * time.Second) })
	behind := f(t, ratelimit.FixedWindow, func() time.Time { return late })
	ctx := context.Background()
	if d, err := ahead.AllowN(ctx, key, limit, 1); err != nil || !d.Allowed {
		t.Fatalf("server ahead: %+v, %v", d, err)
	}
	if d, err := behind.AllowN(ctx, key, limit, 1); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("lagging server: %+v, %v; want the newer window's last unit", d, err)
	}
	if d, err := behind.AllowN(ctx, key, limit, 1); err != nil || d.Allowed {
		t.Fatalf("lagging server: %+v, %v; want denied", d, err)
	}
}

func keysIsolated(t *testing.T, f Factory) {
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
		l := f(t, a, NewClock(epoch).Now)
		base := Key(t)
		// Keys that an encoding of '{', '}' or '%' could confuse, a suffix
		// that looks like the stores' own, and non-ASCII.
		keys := []string{base, base + "}", base + "{x}", base + "%7D", base + "%", base + "ä", base + ":rl", base + "}:rl", base + ":gcra"}
		limit := ratelimit.Limit{Rate: 1, Period: time.Hour}
		for _, k := range keys {
			d, err := l.AllowN(context.Background(), k, limit, 1)
			if err != nil || !d.Allowed {
				t.Fatalf("%v: first call of key %q: %+v, %v (shares state with another key?)", a, k, d, err)
			}
		}
		for _, k := range keys {
			if d, err := l.AllowN(context.Background(), k, limit, 1); err != nil || d.Allowed {
				t.Fatalf("%v: second call of key %q: %+v, %v", a, k, d, err)
			}
		}
	}
}

func badInput(t *testing.T, f Factory) {
	ok := ratelimit.Limit{Rate: 10, Period: time.Second}
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
		l := f(t, a, NewClock(epoch).Now)
		key := Key(t)
		for _, tc := range []struct {
			name  string
			key   string
			limit ratelimit.Limit
			n     int64
		}{
			{"empty key", "", ok, 1},
			{"key too long", strings.Repeat("k", ratelimit.MaxKeyLen+1), ok, 1},
			{"key not UTF-8", "k\xff", ok, 1},
			{"key with NUL", "k\x00", ok, 1},
			{"zero limit", key, ratelimit.Limit{}, 1},
			{"zero rate", key, ratelimit.Limit{Period: time.Second}, 1},
			{"negative rate", key, ratelimit.Limit{Rate: -1, Period: time.Second}, 1},
			{"rate above MaxQuota", key, ratelimit.Limit{Rate: ratelimit.MaxQuota + 1, Period: ratelimit.MaxPeriod}, 1},
			{"zero period", key, ratelimit.Limit{Rate: 1}, 1},
			{"negative period", key, ratelimit.Limit{Rate: 1, Period: -time.Second}, 1},
			{"period MaxInt64", key, ratelimit.Limit{Rate: 1, Period: math.MaxInt64}, 1},
			{"negative burst", key, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: -1}, 1},
			{"burst MaxInt64", key, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: math.MaxInt64}, 1},
			{"cost 0", key, ok, 0},
			{"negative cost", key, ok, -1},
			{"cost above capacity", key, ok, 11},
			{"cost MaxInt64", key, ok, math.MaxInt64},
		} {
			d, err := l.AllowN(context.Background(), tc.key, tc.limit, tc.n)
			if !errors.Is(err, concurkit.ErrInvalidArgument) || d.Allowed {
				t.Errorf("%v: %s: %+v, %v; want an error matching concurkit.ErrInvalidArgument", a, tc.name, d, err)
			}
		}
		if a == ratelimit.FixedWindow {
			if _, err := l.AllowN(context.Background(), key, ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 5}, 1); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("fixed window with a burst: %v", err)
			}
		} else {
			if _, err := l.AllowN(context.Background(), key, ratelimit.Limit{Rate: 2_000_000, Period: time.Second}, 1); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("GCRA faster than one per microsecond: %v", err)
			}
		}
		for _, when := range []time.Time{{}, time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
			l := f(t, a, func() time.Time { return when })
			if _, err := l.AllowN(context.Background(), key, ok, 1); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("%v: clock at %v: %v", a, when, err)
			}
		}
	}
}

func cancelled(t *testing.T, f Factory) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
		l := f(t, a, NewClock(epoch).Now)
		d, err := l.AllowN(ctx, Key(t), ratelimit.Limit{Rate: 1, Period: time.Second}, 1)
		if !errors.Is(err, context.Canceled) || d.Allowed {
			t.Errorf("%v: cancelled context: %+v, %v; want an error matching context.Canceled", a, d, err)
		}
	}
}
