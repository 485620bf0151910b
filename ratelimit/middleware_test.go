package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/problem"
	"github.com/concurkit/concurkit/ratelimit"
)

// fake is a Limiter that answers what it is told and records its calls.
type fake struct {
	d     ratelimit.Decision
	err   error
	keys  []string
	lims  []ratelimit.Limit
	ctxOK func(ctx context.Context) error
}

func (f *fake) AllowN(ctx context.Context, key string, limit ratelimit.Limit, n int64) (ratelimit.Decision, error) {
	f.keys = append(f.keys, key)
	f.lims = append(f.lims, limit)
	if f.ctxOK != nil {
		if err := f.ctxOK(ctx); err != nil {
			return ratelimit.Decision{}, err
		}
	}
	if err := limit.Validate(ratelimit.GCRA); err != nil {
		return ratelimit.Decision{}, err
	}
	d := f.d
	d.Limit = limit
	return d, f.err
}

var perMinute = ratelimit.Limit{Rate: 100, Period: time.Minute}

// serve runs one request through the middleware and a handler that
// answers 204; it reports whether the handler ran.
func serve(t *testing.T, l ratelimit.Limiter, cfg *ratelimit.Config, r *http.Request) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	mw, err := ratelimit.Middleware(l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	rec := httptest.NewRecorder()
	mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran = true; w.WriteHeader(http.StatusNoContent) })).ServeHTTP(rec, r)
	return rec, ran
}

func get() *http.Request { return httptest.NewRequest(http.MethodGet, "/orders", nil) }

func TestAllowed(t *testing.T) {
	f := &fake{d: ratelimit.Decision{Allowed: true, Remaining: 99, ResetAfter: 59*time.Second + time.Millisecond}}
	rec, ran := serve(t, f, &ratelimit.Config{Limit: perMinute}, get())
	if !ran || rec.Code != http.StatusNoContent {
		t.Fatalf("allowed: ran %v, status %d", ran, rec.Code)
	}
	for name, want := range map[string]string{
		"RateLimit-Policy": `"default";q=100;w=60`,
		"RateLimit":        `"default";r=99;t=60`, // 59.001 s rounded up
		"Retry-After":      "",
	} {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if len(f.keys) != 1 || f.keys[0] != "192.0.2.1" {
		t.Errorf("key %v, want the client address of httptest (192.0.2.1)", f.keys)
	}
}

// TestDenied: 429, Retry-After, the RateLimit fields with t equal to
// Retry-After, and the draft's quota-exceeded problem; the handler does
// not run.
func TestDenied(t *testing.T) {
	f := &fake{d: ratelimit.Decision{RetryAfter: 300 * time.Millisecond, ResetAfter: 10 * time.Second}}
	rec, ran := serve(t, f, &ratelimit.Config{Limit: perMinute, Policy: `per "user"\min`}, get())
	if ran || rec.Code != http.StatusTooManyRequests {
		t.Fatalf("denied: ran %v, status %d", ran, rec.Code)
	}
	for name, want := range map[string]string{
		"Retry-After":      "1",
		"RateLimit-Policy": `"per \"user\"\\min";q=100;w=60`,
		"RateLimit":        `"per \"user\"\\min";r=0;t=1`,
		"Content-Type":     problem.ContentType,
	} {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body["type"] != ratelimit.QuotaExceededType || body["status"] != float64(429) ||
		fmt.Sprint(body["violated-policies"]) != `[per "user"\min]` || body["detail"] != "retry after 1 s" {
		t.Errorf("problem %v", body)
	}
}

func TestStoreFailure(t *testing.T) {
	boom := errors.New("store down")
	for _, failOpen := range []bool{false, true} {
		var seen error
		f := &fake{err: boom}
		rec, ran := serve(t, f, &ratelimit.Config{Limit: perMinute, FailOpen: failOpen,
			OnError: func(_ *http.Request, err error) { seen = err }}, get())
		if !errors.Is(seen, boom) {
			t.Errorf("FailOpen %v: OnError got %v", failOpen, seen)
		}
		if rec.Header().Get("RateLimit") != "" {
			t.Errorf("FailOpen %v: RateLimit %q on a failure", failOpen, rec.Header().Get("RateLimit"))
		}
		if failOpen {
			if !ran || rec.Code != http.StatusNoContent {
				t.Errorf("fail-open: ran %v, status %d", ran, rec.Code)
			}
			continue
		}
		if ran || rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Content-Type") != problem.ContentType {
			t.Errorf("fail-closed (the default): ran %v, status %d, %q", ran, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}

// TestMisconfigurationNeverOpens: an invalid limit from LimitFor or an
// empty key is 500, with FailOpen too.
func TestMisconfigurationNeverOpens(t *testing.T) {
	for name, cfg := range map[string]*ratelimit.Config{
		"invalid LimitFor": {LimitFor: func(*http.Request, string) ratelimit.Limit { return ratelimit.Limit{} }, FailOpen: true},
		"empty key":        {Limit: perMinute, Key: func(*http.Request) string { return "" }, FailOpen: true},
	} {
		var seen error
		cfg.OnError = func(_ *http.Request, err error) { seen = err }
		rec, ran := serve(t, &fake{}, cfg, get())
		if ran || rec.Code != http.StatusInternalServerError || !errors.Is(seen, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: ran %v, status %d, error %v", name, ran, rec.Code, seen)
		}
	}
}

func TestPerKeyLimitsAndTimeout(t *testing.T) {
	f := &fake{d: ratelimit.Decision{Allowed: true}, ctxOK: func(ctx context.Context) error {
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > 250*time.Millisecond {
			return fmt.Errorf("deadline %v, %v: want within the 250 ms Timeout", dl, ok)
		}
		if ctx.Value(ctxKey{}) != "request value" {
			return errors.New("the request's context was not passed on")
		}
		return nil
	}}
	gold := ratelimit.Limit{Rate: 1000, Period: time.Second}
	cfg := &ratelimit.Config{
		Key: func(r *http.Request) string { return r.Header.Get("X-API-Key") },
		LimitFor: func(_ *http.Request, key string) ratelimit.Limit {
			if strings.HasPrefix(key, "gold-") {
				return gold
			}
			return perMinute
		},
		Timeout: 250 * time.Millisecond,
	}
	for _, key := range []string{"gold-1", "free-1"} {
		r := get()
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, "request value"))
		r.Header.Set("X-API-Key", key)
		if rec, ran := serve(t, f, cfg, r); !ran {
			t.Fatalf("%s: status %d", key, rec.Code)
		}
	}
	if f.lims[0] != gold || f.lims[1] != perMinute || f.keys[1] != "free-1" {
		t.Errorf("limits %v for keys %v", f.lims, f.keys)
	}
	// No w for a period that is not whole seconds.
	rec, _ := serve(t, &fake{d: ratelimit.Decision{Allowed: true}}, &ratelimit.Config{Limit: ratelimit.Limit{Rate: 5, Period: 1500 * time.Millisecond}}, get())
	if got := rec.Header().Get("RateLimit-Policy"); got != `"default";q=5` {
		t.Errorf("sub-second window: %q", got)
	}
}

type ctxKey struct{}

func TestMiddlewareBadConfig(t *testing.T) {
	var nilLimiter *fake
	for name, tc := range map[string]struct {
		l   ratelimit.Limiter
		cfg *ratelimit.Config
	}{
		"nil limiter":       {nil, &ratelimit.Config{Limit: perMinute}},
		"typed nil limiter": {nilLimiter, &ratelimit.Config{Limit: perMinute}},
		"nil config":        {&fake{}, nil},
		"zero limit":        {&fake{}, &ratelimit.Config{}},
		"negative timeout":  {&fake{}, &ratelimit.Config{Limit: perMinute, Timeout: -time.Second}},
		"policy not ASCII":  {&fake{}, &ratelimit.Config{Limit: perMinute, Policy: "päť"}},
		"policy control":    {&fake{}, &ratelimit.Config{Limit: perMinute, Policy: "a\nb"}},
		"absurd period":     {&fake{}, &ratelimit.Config{Limit: ratelimit.Limit{Rate: 1, Period: 1 << 62}}},
	} {
		if _, err := ratelimit.Middleware(tc.l, tc.cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A limit only a fixed window takes is accepted (the algorithm is the
	// Limiter's).
	if _, err := ratelimit.Middleware(&fake{}, &ratelimit.Config{Limit: ratelimit.Limit{Rate: 2_000_000, Period: time.Second}}); err != nil {
		t.Errorf("a fixed-window-only limit: %v", err)
	}
}

func TestClientIP(t *testing.T) {
	for addr, want := range map[string]string{
		"203.0.113.7:4321":              "203.0.113.7",
		"[2001:db8:1:2:3:4:5:6]:443":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1%eth0]:1": "2001:db8:1:2::/64",
		"[::ffff:203.0.113.7]:80":       "203.0.113.7",
		"not an address":                "not an address",
		"@unix":                         "@unix",
	} {
		r := get()
		r.RemoteAddr = addr
		if got := ratelimit.ClientIP(r); got != want {
			t.Errorf("ClientIP(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestWriteHeadersEdges(t *testing.T) {
	h := http.Header{}
	ratelimit.WriteHeaders(h, "a\x01ü", ratelimit.Decision{Allowed: true, Limit: ratelimit.Limit{Rate: 3, Period: 2 * time.Hour}, Remaining: 2})
	if got := h.Get("RateLimit-Policy"); got != `"a???";q=3;w=7200` {
		t.Errorf("policy %q", got)
	}
	if got := h.Get("RateLimit"); got != `"a???";r=2;t=0` {
		t.Errorf("ratelimit %q", got)
	}
}

func TestLimitValidateAndString(t *testing.T) {
	for _, tc := range []struct {
		l    ratelimit.Limit
		a    ratelimit.Algorithm
		ok   bool
		text string
	}{
		{ratelimit.Limit{Rate: 10, Period: time.Second}, ratelimit.GCRA, true, "10 per 1s"},
		{ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 3}, ratelimit.GCRA, true, "10 per 1s (burst 3)"},
		{ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 3}, ratelimit.FixedWindow, false, ""},
		{ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 10}, ratelimit.FixedWindow, true, "10 per 1s"},
		{ratelimit.Limit{Rate: 1, Period: ratelimit.MaxPeriod}, ratelimit.GCRA, true, ""},
		{ratelimit.Limit{Rate: 1, Period: ratelimit.MaxPeriod + 1}, ratelimit.GCRA, false, ""},
		{ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 87600 + 1}, ratelimit.GCRA, false, ""}, // refill > 10 years
		{ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 87600}, ratelimit.GCRA, true, ""},
		{ratelimit.Limit{Rate: 1_000_000, Period: time.Second}, ratelimit.GCRA, true, ""},
		{ratelimit.Limit{Rate: 1_000_001, Period: time.Second}, ratelimit.GCRA, false, ""},
		{ratelimit.Limit{Rate: 1_000_001, Period: time.Second}, ratelimit.FixedWindow, true, ""},
		{ratelimit.Limit{Rate: 1, Period: time.Second}, ratelimit.Algorithm(9), false, ""},
	} {
		err := tc.l.Validate(tc.a)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, concurkit.ErrInvalidArgument)) {
			t.Errorf("%+v.Validate(%v) = %v, want ok %v", tc.l, tc.a, err, tc.ok)
		}
		if tc.text != "" && tc.l.String() != tc.text {
			t.Errorf("String() = %q, want %q", tc.l.String(), tc.text)
		}
	}
	if ratelimit.GCRA.String() != "gcra" || ratelimit.FixedWindow.String() != "fixed-window" || ratelimit.Algorithm(9).String() != "Algorithm(9)" {
		t.Error("Algorithm.String")
	}
}
