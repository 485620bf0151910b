package redlock_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/fenced"
)

// benchAcquireRelease measures one uncontended Acquire + Release on 5
// masters per iteration and reports the median and p99 in microseconds.
func benchAcquireRelease(b *testing.B, cs []*goredis.Client, prefix string, src fenced.Source) {
	l, err := redlock.New(cs, &redlock.Config{Source: src})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// A fresh key per call: each call brings a new token source, and one key
	// must only ever see tokens of one source (see the package doc).
	key := prefix + b.Name() + "/" + rand.Text()
	opts := &distlock.Options{TTL: 10 * time.Second}
	h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	for b.Loop() {
		start := time.Now()
		ls, err := l.Acquire(ctx, key, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			b.Fatal(err)
		}
		_ = h.RecordValue(time.Since(start).Microseconds())
	}
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
}

func BenchmarkAcquireRelease(b *testing.B) {
	cs, prefix := redlockEnv(b)
	b.Run("tokens=postgres-sequence", func(b *testing.B) {
		_, src := tokenSource(b)
		benchAcquireRelease(b, cs, prefix, src)
	})
	b.Run("tokens=in-process", func(b *testing.B) { benchAcquireRelease(b, cs, prefix, &counter{}) })
}
