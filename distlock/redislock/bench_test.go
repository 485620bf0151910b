package redislock_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
)

// localTokens is an in-process fenced.Source: strictly increasing within
// one process, which is all a single-process benchmark needs. It isolates
// the lock protocol's cost from the token source's.
type localTokens struct{ n atomic.Int64 }

func (s *localTokens) Next(context.Context) (fenced.Token, error) {
	return fenced.Token(s.n.Add(1)), nil
}

// benchAcquireRelease measures one uncontended Acquire + Release per
// iteration and reports the median and p99 in microseconds.
func benchAcquireRelease(b *testing.B, src fenced.Source) {
	c, prefix := redisEnv(b)
	l, err := redislock.New(c, &redislock.Config{Source: src})
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
	b.Run("tokens=postgres-sequence", func(b *testing.B) {
		_, src := tokenSource(b)
		benchAcquireRelease(b, src)
	})
	b.Run("tokens=in-process", func(b *testing.B) { benchAcquireRelease(b, &localTokens{}) })
}
