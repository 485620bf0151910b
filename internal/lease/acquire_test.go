package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/internal/lease"
)

func TestResolve(t *testing.T) {
	opts := &distlock.Options{}
	o, err := lease.Resolve("k", opts)
	if err != nil || o.TTL != distlock.DefaultTTL || opts.TTL != 0 {
		t.Fatalf("Resolve = %+v, %v (caller's struct %+v)", o, err, opts)
	}
	if o, err := lease.Resolve("k", nil); err != nil || o.TTL != distlock.DefaultTTL {
		t.Fatalf("nil opts: %+v, %v", o, err)
	}
	if _, err := lease.Resolve("", nil); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := lease.Resolve("k", &distlock.Options{TTL: -1}); !errors.Is(err, distlock.ErrInvalidOptions) {
		t.Fatalf("negative TTL: %v", err)
	}
}

func TestPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		got, err := lease.Poll(t.Context(), lease.PollPolicy{}, func(context.Context) (int, error) {
			n++
			if n < 5 {
				return 0, distlock.ErrNotAcquired
			}
			return 42, nil
		})
		if err != nil || got != 42 || n != 5 {
			t.Fatalf("Poll = %d, %v after %d tries", got, err, n)
		}

		boom := errors.New("boom")
		_, err = lease.Poll(t.Context(), lease.PollPolicy{}, func(context.Context) (int, error) { return 0, boom })
		if err != boom {
			t.Fatalf("Poll = %v, want boom unchanged", err)
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = lease.Poll(ctx, lease.PollPolicy{Min: time.Millisecond, Max: 10 * time.Millisecond}, func(context.Context) (int, error) {
			return 0, distlock.ErrNotAcquired
		})
		if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Poll = %v", err)
		}
	})
}
