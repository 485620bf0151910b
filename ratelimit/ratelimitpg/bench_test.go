package ratelimitpg_test

import (
	"testing"
	"time"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitpg"
	"github.com/concurkit/concurkit/ratelimit/ratelimittest"
	"github.com/concurkit/concurkit/testkit"
)

// BenchmarkAllow is the decision latency of each algorithm on a pool, one
// caller, one key: "allowed" takes the write path, "denied" the refusal
// (for GCRA with its second, read-only round trip).
func BenchmarkAllow(b *testing.B) {
	pool := testkit.PostgresPoolFor(b, schema(b))
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
		for _, tc := range []struct {
			name  string
			limit ratelimit.Limit
		}{{"allowed", ratelimit.Limit{Rate: 1_000_000, Period: time.Hour}}, {"denied", ratelimit.Limit{Rate: 1, Period: time.Hour}}} {
			b.Run(a.String()+"/"+tc.name, func(b *testing.B) {
				l := newLimiter(b, pool, &ratelimitpg.Config{Algorithm: a})
				key := ratelimittest.Key(b)
				for b.Loop() {
					if _, err := l.Allow(b.Context(), key, tc.limit); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
