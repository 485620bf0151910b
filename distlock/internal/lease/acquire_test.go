package lease_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     string
		opts    *distlock.Options
		wantTTL time.Duration
		wantErr error
	}{
		{"nil options", "k", nil, distlock.DefaultTTL, nil},
		{"zero TTL", "k", &distlock.Options{}, distlock.DefaultTTL, nil},
		{"1ns", "k", &distlock.Options{TTL: 1}, 1, nil},
		{"max TTL passes through", "k", &distlock.Options{TTL: math.MaxInt64}, math.MaxInt64, nil},
		{"auto-extend kept", "k", &distlock.Options{TTL: time.Second, AutoExtend: true}, time.Second, nil},
		{"negative TTL", "k", &distlock.Options{TTL: -1}, 0, concurkit.ErrInvalidArgument},
		{"min TTL", "k", &distlock.Options{TTL: math.MinInt64}, 0, concurkit.ErrInvalidArgument},
		{"empty key", "", nil, 0, distlock.ErrInvalidKey},
		{"empty key and bad TTL", "", &distlock.Options{TTL: -1}, 0, distlock.ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before distlock.Options
			if tc.opts != nil {
				before = *tc.opts
			}
			o, err := lease.Resolve("test", tc.key, tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Resolve = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || o.TTL != tc.wantTTL {
				t.Fatalf("Resolve = %+v, %v; want TTL %v", o, err, tc.wantTTL)
			}
			if tc.opts != nil && (*tc.opts != before || o.AutoExtend != before.AutoExtend) {
				t.Fatalf("caller's options %+v changed or not copied (got %+v)", *tc.opts, o)
			}
			// The resolved TTL makes a lease without overflow.
			l, err := lease.New(lease.Config{Key: tc.key, Token: 1, TTL: o.TTL})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.Background())
			if dl, _ := l.Deadline(); o.TTL > time.Millisecond && !dl.After(time.Now()) {
				t.Fatalf("deadline %v for TTL %v is not in the future", dl, o.TTL)
			}
		})
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
