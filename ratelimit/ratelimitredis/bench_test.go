package ratelimitredis_test

import (
	"slices"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimittest"
)

// BenchmarkVsRedisRate measures the decision latency of this package's
// GCRA and of github.com/go-redis/redis_rate/v10 (also GCRA, one Lua
// script) on the same Redis server, in one run, interleaved call by call
// (the order alternating) so that load on the shared machine hits both
// alike. It reports each one's p50 and mean in µs and the ratios
// concurkit/redis_rate. "allowed" keeps every call under the limit (the
// write path); "denied" exhausts the limit first (the read-only path).
func BenchmarkVsRedisRate(b *testing.B) {
	for _, tc := range []struct {
		name  string
		rate  int
		burst int
	}{{"allowed", 1_000_000, 1_000_000}, {"denied", 1, 1}} {
		b.Run(tc.name, func(b *testing.B) {
			c := client(b)
			ck := newLimiter(b, c, ratelimit.GCRA, nil)
			rr := redis_rate.NewLimiter(c)
			key := ratelimittest.Key(b)
			b.Cleanup(func() { c.Del(b.Context(), "rate:"+key) })
			ckLimit := ratelimit.Limit{Rate: int64(tc.rate), Period: time.Hour, Burst: int64(tc.burst)}
			rrLimit := redis_rate.Limit{Rate: tc.rate, Period: time.Hour, Burst: tc.burst}
			ctx := b.Context()
			for range 2 { // load the scripts, use up a limit of 1
				if _, err := ck.Allow(ctx, key, ckLimit); err != nil {
					b.Fatal(err)
				}
				if _, err := rr.Allow(ctx, key, rrLimit); err != nil {
					b.Fatal(err)
				}
			}
			var ckLat, rrLat []time.Duration
			var ckAllowed, rrAllowed int
			for i := 0; b.Loop(); i++ {
				for j := range 2 {
					start := time.Now()
					if (i+j)%2 == 0 {
						d, err := ck.Allow(ctx, key, ckLimit)
						ckLat = append(ckLat, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						if d.Allowed {
							ckAllowed++
						}
					} else {
						r, err := rr.Allow(ctx, key, rrLimit)
						rrLat = append(rrLat, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						if r.Allowed > 0 {
							rrAllowed++
						}
					}
				}
			}
			if want := map[string]int{"allowed": len(ckLat), "denied": 0}[tc.name]; ckAllowed != want || rrAllowed != want {
				b.Fatalf("%d and %d allowed, want %d each", ckAllowed, rrAllowed, want)
			}
			ckP50, ckMean := stats(ckLat)
			rrP50, rrMean := stats(rrLat)
			b.ReportMetric(ckP50, "ck-p50-µs")
			b.ReportMetric(rrP50, "redis_rate-p50-µs")
			b.ReportMetric(ckMean, "ck-mean-µs")
			b.ReportMetric(rrMean, "redis_rate-mean-µs")
			b.ReportMetric(ckP50/rrP50, "ratio-p50")
			b.ReportMetric(ckMean/rrMean, "ratio-mean")
		})
	}
}

// stats returns the median and the mean of d, in microseconds.
func stats(d []time.Duration) (p50, mean float64) {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return float64(s[len(s)/2]) / 1e3, float64(sum) / float64(len(s)) / 1e3
}

// BenchmarkAllow is the decision latency of each algorithm, one client.
func BenchmarkAllow(b *testing.B) {
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA} {
		b.Run(a.String(), func(b *testing.B) {
			l := newLimiter(b, client(b), a, nil)
			key := ratelimittest.Key(b)
			limit := ratelimit.Limit{Rate: 1_000_000, Period: time.Hour}
			for b.Loop() {
				if _, err := l.Allow(b.Context(), key, limit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
