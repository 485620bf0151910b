package ratelimitpg_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitpg"
	"github.com/concurkit/concurkit/testkit"
)

// TestErrorsHideKey: no error of the limiter contains the key (an API
// key): refused keys, a server that is not there, a missing table.
func TestErrorsHideKey(t *testing.T) {
	const secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	ctx := t.Context()
	limit := ratelimit.Limit{Rate: 10, Period: time.Second}
	check := func(what string, err error, stored bool) {
		t.Helper()
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %v (must be an error without the key)", what, err)
		} else if stored && !strings.Contains(err.Error(), ratelimit.KeyID(secret)) {
			t.Errorf("%s: the error does not name the key by %s: %v", what, ratelimit.KeyID(secret), err)
		}
	}
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, algo := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		l := newLimiter(t, pool, &ratelimitpg.Config{Algorithm: algo})
		_, err := l.Allow(ctx, secret, limit)
		check(algo.String()+", closed port, Allow", err, true)
		check(algo.String()+", closed port, Reset", l.Reset(ctx, secret), true)
		for _, bad := range []string{secret + "\x00", secret + "\xff"} {
			_, err := l.Allow(ctx, bad, limit)
			if !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("key %q: %v", bad, err)
			}
			check("refused key", err, false)
		}
	}
	// The server answers, but the schema has no tables.
	l := newLimiter(t, testkit.Postgres(t), nil)
	_, err = l.Allow(ctx, secret, limit)
	check("missing table", err, true)
}
