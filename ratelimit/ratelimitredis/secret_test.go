package ratelimitredis_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/testkit"
)

// secret is a rate-limit key that is a credential, as the package doc
// suggests keys may be.
const secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"

// hidesKey fails t if err is nil or its message contains key (raw or
// quoted); a store error must name the key by ratelimit.KeyID.
func hidesKey(t *testing.T, what string, err error, key string, stored bool) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	msg := err.Error()
	if strings.Contains(msg, key) || strings.Contains(msg, strconv.Quote(key)[1:len(strconv.Quote(key))-1]) {
		t.Errorf("%s: the error quotes the key: %s", what, msg)
	}
	if stored && !strings.Contains(msg, ratelimit.KeyID(key)) {
		t.Errorf("%s: the error does not name the key by %s: %s", what, ratelimit.KeyID(key), msg)
	}
}

// TestErrorsHideKey: no error of the limiter contains the key — refused
// keys, a server that is not there (closed port, default client options),
// one killed mid-use, one frozen past the caller's deadline — and neither
// does what the middleware hands to OnError or writes to the client.
func TestErrorsHideKey(t *testing.T) {
	ctx := t.Context()
	limit := ratelimit.Limit{Rate: 10, Period: time.Second}

	closed := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = closed.Close() })
	l := newLimiter(t, closed, ratelimit.GCRA, nil)
	_, err := l.Allow(ctx, secret, limit)
	hidesKey(t, "closed port, Allow", err, secret, true)
	hidesKey(t, "closed port, Reset", l.Reset(ctx, secret), secret, true)
	for _, bad := range []string{secret + "\x00", secret + "\xff"} {
		_, err := l.Allow(ctx, bad, limit)
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("key %q: %v, want ErrInvalidArgument", bad, err)
		}
		hidesKey(t, "refused key", err, secret, false)
	}

	p := testkit.StartRedis(t, 1)[0]
	c := testkit.RedisClient(t, p.Addr, "")
	for _, algo := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		l := newLimiter(t, c, algo, nil)
		if _, err := l.Allow(ctx, secret, limit); err != nil {
			t.Fatal(err)
		}
		p.Freeze(t)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := l.Allow(short, secret, limit)
		cancel()
		p.Thaw(t)
		hidesKey(t, algo.String()+", frozen server", err, secret, true)
	}
	p.Kill(t)
	l = newLimiter(t, c, ratelimit.GCRA, nil)
	_, err = l.Allow(ctx, secret, limit)
	hidesKey(t, "killed server, Allow", err, secret, true)
	hidesKey(t, "killed server, Reset", l.Reset(ctx, secret), secret, true)

	var seen error
	mw, err := ratelimit.Middleware(l, &ratelimit.Config{Limit: limit, Key: func(*http.Request) string { return secret },
		OnError: func(_ *http.Request, err error) { seen = err }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mw(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	hidesKey(t, "middleware OnError", seen, secret, true)
	body, _ := io.ReadAll(rec.Result().Body)
	if rec.Code != http.StatusServiceUnavailable || strings.Contains(string(body), secret) {
		t.Errorf("middleware answered %d %q", rec.Code, body)
	}
}
