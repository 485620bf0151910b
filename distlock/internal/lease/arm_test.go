package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/concurkit/concurkit/distlock/internal/lease"
)

// TestTimerArmedWhenWatched: a lease whose context nobody looks at has no
// expiry timer (each one breaks the runtime's network poller out of its
// wait); the first Done or Err arms it, and every way of watching the
// context still sees it end at the deadline with cause ErrExpired.
func TestTimerArmedWhenWatched(t *testing.T) {
	for name, watch := range map[string]func(t *testing.T, ctx context.Context){
		"Done": func(t *testing.T, ctx context.Context) { <-ctx.Done() },
		"Err": func(t *testing.T, ctx context.Context) {
			for ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
		},
		"derived": func(t *testing.T, ctx context.Context) {
			d, cancel := context.WithCancel(ctx)
			defer cancel()
			<-d.Done()
		},
		"AfterFunc": func(t *testing.T, ctx context.Context) {
			done := make(chan struct{})
			context.AfterFunc(ctx, func() { close(done) })
			<-done
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Second, Start: start})
				if err != nil {
					t.Fatal(err)
				}
				ctx := l.Context()
				if lease.TimerArmed(l) {
					t.Fatal("expiry timer armed for a lease nobody watches")
				}
				watch(t, ctx)
				dl, _ := l.Deadline()
				if now := time.Now(); now.Before(dl) || now.Sub(dl) > 10*time.Millisecond {
					t.Fatalf("context ended %v after the deadline", now.Sub(dl))
				}
				if c := context.Cause(ctx); !errors.Is(c, lease.ErrExpired) {
					t.Fatalf("cause %v, want ErrExpired", c)
				}
				_ = l.Release(t.Context())
			})
		})
	}
}

// TestUnwatchedLeaseStillExpires: without a timer, Valid and Extend still
// read the clock, and a context looked at only after the deadline is done
// at once.
func TestUnwatchedLeaseStillExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if l.Context().Err() == nil {
			t.Fatal("context of an expired lease not done when first looked at")
		}
		if l.Valid() {
			t.Fatal("expired lease Valid")
		}
		if c := context.Cause(l.Context()); !errors.Is(c, lease.ErrExpired) {
			t.Fatalf("cause %v, want ErrExpired", c)
		}
		_ = l.Release(t.Context())
	})
}
