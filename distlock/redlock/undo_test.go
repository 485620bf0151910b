package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
)

// scriptHook runs before and after every script call (EVALSHA, EVAL) a
// client makes once armed, with the number of that call (1 for the first).
type scriptHook struct {
	armed  *atomic.Bool
	calls  *atomic.Int32
	before func(ctx context.Context, call int32)
	after  func(call int32)
}

func (h scriptHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h scriptHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

func (h scriptHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if n := cmd.Name(); n != "evalsha" && n != "eval" || !h.armed.Load() {
			return next(ctx, cmd)
		}
		call := h.calls.Add(1)
		h.before(ctx, call)
		err := next(ctx, cmd)
		h.after(call)
		return err
	}
}

// TestFailedAttemptUndone: an attempt that two masters accepted and a
// majority refused (the lock is held there) returns ErrNotAcquired only
// once those two have deleted it again, so that the next TryAcquire does
// not meet the failed attempt's value. (A loaded CI run's TryAcquireHeld
// met it: "0 of 5 masters accepted (3 busy…)" right after a Release.)
// The deletes are slowed (300 ms, a slow server) to leave a background
// delete running when TryAcquire returns; the busy masters answer only
// after the free ones did, so both acceptances count in the attempt.
func TestFailedAttemptUndone(t *testing.T) {
	direct, prefix := redlockEnv(t)
	if len(direct) != 5 {
		t.Fatalf("%d masters, want 5", len(direct))
	}
	key := prefix + "k"
	var (
		armed    atomic.Bool
		accepts  atomic.Int32
		accepted = make(chan struct{}) // closed when both free masters' acquire replies are back
		deleted  [5]atomic.Bool
	)
	cs := make([]*goredis.Client, len(direct))
	for i, d := range direct {
		o := *d.Options()
		cs[i] = goredis.NewClient(&o)
		t.Cleanup(func() { _ = cs[i].Close() })
		calls := new(atomic.Int32)
		busy := i < 3
		cs[i].AddHook(scriptHook{armed: &armed, calls: calls,
			before: func(ctx context.Context, call int32) {
				switch {
				case busy && call == 1:
					select {
					case <-accepted:
					case <-ctx.Done():
					}
				case !busy && call > 1:
					time.Sleep(300 * time.Millisecond) // a slow delete
				}
			},
			after: func(call int32) {
				switch {
				case !busy && call == 1:
					if accepts.Add(1) == 2 {
						close(accepted)
					}
				case !busy:
					deleted[i].Store(true)
				}
			},
		})
	}
	l, err := redlock.New(cs, &redlock.Config{Source: &counter{}, NodeTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	warmUp(t, l, prefix+"warm-up")
	for i := range 3 {
		if err := direct[i].Set(t.Context(), redlock.LockKey(key), "0:another holder", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	armed.Store(true)
	ls, err := l.TryAcquire(t.Context(), key, &distlock.Options{TTL: 10 * time.Second})
	if !errors.Is(err, distlock.ErrNotAcquired) || ls != nil {
		t.Fatalf("TryAcquire on a key held on 3 of 5 masters = (%v, %v), want ErrNotAcquired", ls, err)
	}
	if n := holdersAny(t, direct[3:], key); n != 0 || !deleted[3].Load() || !deleted[4].Load() {
		t.Fatalf("TryAcquire returned with the failed attempt's lock still on %d of the 2 masters that accepted it (deletes answered: %v, %v)",
			n, deleted[3].Load(), deleted[4].Load())
	}
}
