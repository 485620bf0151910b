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
// iteration and reports the median and p99 in microseconds. ctx makes the
// context of each call from context.Background().
func benchAcquireRelease(b *testing.B, src fenced.Source, ctxOf func(context.Context) (context.Context, context.CancelFunc)) {
	c, prefix := redisEnv(b)
	l, err := redislock.New(c, &redislock.Config{Source: src})
	if err != nil {
		b.Fatal(err)
	}
	// A fresh key per call: each call brings a new token source, and one key
	// must only ever see tokens of one source (see the package doc).
	key := prefix + b.Name() + "/" + rand.Text()
	opts := &distlock.Options{TTL: 10 * time.Second}
	h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	for b.Loop() {
		start := time.Now()
		ctx, cancel := ctxOf(context.Background())
		ls, err := l.Acquire(ctx, key, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		_ = h.RecordValue(time.Since(start).Microseconds())
	}
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
}

// BenchmarkAcquireRelease runs with the test client (ContextTimeoutEnabled):
// under a context that can never end each request runs on the caller's
// goroutine; under one that can be cancelled (with a deadline or not) it
// runs on another goroutine, which the caller can stop waiting for (no
// client stops a request on cancellation).
func BenchmarkAcquireRelease(b *testing.B) {
	background := func(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }
	withCancel := func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	withDeadline := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 10*time.Second)
	}
	b.Run("tokens=postgres-sequence", func(b *testing.B) {
		_, src := tokenSource(b)
		benchAcquireRelease(b, src, background)
	})
	b.Run("tokens=in-process", func(b *testing.B) { benchAcquireRelease(b, &localTokens{}, background) })
	b.Run("tokens=in-process/ctx=cancel", func(b *testing.B) { benchAcquireRelease(b, &localTokens{}, withCancel) })
	b.Run("tokens=in-process/ctx=deadline", func(b *testing.B) { benchAcquireRelease(b, &localTokens{}, withDeadline) })
}
