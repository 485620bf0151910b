package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/testkit"
)

// counter is an in-process token source: enough for lockers of one test.
type counter struct{ n atomic.Int64 }

func (c *counter) Next(context.Context) (fenced.Token, error) { return fenced.Token(c.n.Add(1)), nil }

// redisLockers returns two lockers (as two processes would have) on the
// test Redis sharing one token source, and a key unique to the test.
func redisLockers(t *testing.T) (a, b distlock.Locker, key string) {
	t.Helper()
	addr := testkit.RedisAddr(t)
	src := &counter{}
	mk := func() distlock.Locker {
		l, err := redislock.New(testkit.RedisClient(t, addr, ""), &redislock.Config{Source: src, FenceTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	return mk(), mk(), fmt.Sprintf("do-test/%s/%d", t.Name(), rand.Uint32())
}

// free reports whether key can be acquired now (and gives it back).
func free(t *testing.T, l distlock.Locker, key string) bool {
	t.Helper()
	ls, err := l.TryAcquire(t.Context(), key, nil)
	if errors.Is(err, distlock.ErrNotAcquired) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	return true
}

// TestDoHoldsThenReleases: fn runs while the lock is held (another locker
// cannot take it), with a live context and a valid lease; after Do the
// lock is free; fn's error is returned as is.
func TestDoHoldsThenReleases(t *testing.T) {
	a, b, key := redisLockers(t)
	ran := false
	err := distlock.Do(t.Context(), a, key, nil, func(ctx context.Context, lease distlock.Lease) error {
		ran = true
		if ctx.Err() != nil || !lease.Valid() || lease.Key() != key || !lease.Token().Valid() {
			t.Errorf("in fn: ctx %v, valid %v, key %q, token %d", ctx.Err(), lease.Valid(), lease.Key(), lease.Token())
		}
		if free(t, b, key) {
			t.Error("the lock was free while fn ran")
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v (fn ran: %v)", err, ran)
	}
	if !free(t, b, key) {
		t.Fatal("the lock is held after Do returned")
	}

	boom := errors.New("boom")
	err = distlock.Do(t.Context(), a, key, nil, func(context.Context, distlock.Lease) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Do = %v, want fn's error alone", err)
	}
	if !free(t, b, key) {
		t.Fatal("the lock is held after fn failed")
	}

	// fn may release the lease itself (with a context other than its own,
	// which ends as the lease does); Do's own Release then returns nil.
	err = distlock.Do(t.Context(), a, key, nil, func(ctx context.Context, lease distlock.Lease) error {
		if err := lease.Release(t.Context()); err != nil {
			return err
		}
		if c := context.Cause(ctx); !errors.Is(c, distlock.ErrReleased) {
			t.Errorf("fn's context after Release: cause %v, want ErrReleased", c)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do with fn releasing = %v, want nil", err)
	}
}

// TestDoLeaseLostDuringFn: a lease that expires while fn runs (short TTL,
// no extension) ends fn's context with the loss as its cause, and Do
// returns fn's error joined with the loss.
func TestDoLeaseLostDuringFn(t *testing.T) {
	a, b, key := redisLockers(t)
	const ttl = 600 * time.Millisecond
	var lease distlock.Lease
	err := distlock.Do(t.Context(), a, key, &distlock.Options{TTL: ttl}, func(ctx context.Context, l distlock.Lease) error {
		lease = l
		select {
		case <-ctx.Done():
		case <-time.After(20 * ttl):
			return errors.New("fn's context outlived the lease")
		}
		if c := context.Cause(ctx); !errors.Is(c, distlock.ErrLeaseLost) {
			return fmt.Errorf("fn's context ended with cause %v, want ErrLeaseLost", c)
		}
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Do = %v, want fn's error (context.Canceled) joined with ErrLeaseLost", err)
	}
	if lease.Valid() {
		t.Fatal("lease valid after Do")
	}
	if !free(t, b, key) {
		t.Fatal("the expired lock is still held")
	}

	// A loss fn does not notice (it returns nil) is still reported.
	err = distlock.Do(t.Context(), a, key, &distlock.Options{TTL: ttl}, func(_ context.Context, l distlock.Lease) error {
		for l.Valid() {
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	})
	var done *distlock.CompletedError
	if !errors.Is(err, distlock.ErrLeaseLost) || !errors.As(err, &done) {
		t.Fatalf("Do = %v, want a *CompletedError matching ErrLeaseLost (fn returned nil after the lease expired)", err)
	}
	// fn failing after the loss is a failure, not a completion.
	err = distlock.Do(t.Context(), a, key, &distlock.Options{TTL: ttl}, func(ctx context.Context, _ distlock.Lease) error {
		<-ctx.Done()
		return errors.New("charge failed")
	})
	if errors.As(err, &done) || !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Do = %v, want fn's error with ErrLeaseLost, not a *CompletedError", err)
	}
}

// TestDoCompletedThenUnconfirmedRelease: fn succeeded, then the release
// could not be confirmed (the caller's context ended while a frozen
// server held the cleanup): Do says fn completed (*CompletedError), and
// the error matches concurkit.ErrOutcomeUnknown — a job loop that retries
// only on failure does not pay the interest twice. (The old Do returned
// the release error alone: nothing told the two apart.)
func TestDoCompletedThenUnconfirmedRelease(t *testing.T) {
	p := testkit.StartRedis(t, 1)[0]
	l, err := redislock.New(testkit.RedisClient(t, p.Addr, ""), &redislock.Config{Source: &counter{}, FenceTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	paid := 0
	err = distlock.Do(ctx, l, "interest", nil, func(context.Context, distlock.Lease) error {
		paid++
		p.Freeze(t) // the server stops answering after the work committed
		cancel()    // and the caller gives up waiting for the release
		return nil
	})
	p.Thaw(t)
	var done *distlock.CompletedError
	if !errors.As(err, &done) || !errors.Is(err, concurkit.ErrOutcomeUnknown) || paid != 1 {
		t.Fatalf("Do = %v (paid %d), want a *CompletedError matching concurkit.ErrOutcomeUnknown", err, paid)
	}
}

// TestDoCallerCancel: the caller's cancellation ends fn's context with the
// caller's cause; the lock is released all the same (in the background
// when the caller no longer waits: the release is then unconfirmed).
func TestDoCallerCancel(t *testing.T) {
	a, b, key := redisLockers(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("shutting down")
	err := distlock.Do(ctx, a, key, nil, func(ctx context.Context, _ distlock.Lease) error {
		cancel(stop)
		<-ctx.Done()
		if c := context.Cause(ctx); c != stop {
			t.Errorf("fn's context cause %v, want the caller's", c)
		}
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Do = %v, want context.Canceled (and no loss)", err)
	}
	t.Logf("Do = %v", err) // with an unconfirmed release, most of the time: the caller stopped waiting
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	ls, err := b.Acquire(wctx, key, nil) // the background release frees it
	if err != nil {
		t.Fatalf("the lock was not released after a cancelled Do: %v", err)
	}
	_ = ls.Release(t.Context())
}

// TestDoPanic: a panic in fn goes on after the lease was released.
func TestDoPanic(t *testing.T) {
	a, b, key := redisLockers(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = distlock.Do(t.Context(), a, key, nil, func(context.Context, distlock.Lease) error { panic("boom") })
	}()
	if !free(t, b, key) {
		t.Fatal("the lock is held after fn panicked")
	}
}

// TestDoNotAcquired: when the lock cannot be had, fn does not run and Do
// returns Acquire's error.
func TestDoNotAcquired(t *testing.T) {
	a, b, key := redisLockers(t)
	held, err := b.Acquire(t.Context(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err = distlock.Do(ctx, a, key, nil, func(context.Context, distlock.Lease) error {
		t.Error("fn ran without the lock")
		return nil
	})
	if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
}

// TestDoBadInput: a nil (or typed-nil) locker or fn is bad input, before
// any I/O; a bad key is Acquire's ErrInvalidKey.
func TestDoBadInput(t *testing.T) {
	fn := func(context.Context, distlock.Lease) error { return nil }
	var nilRedis *redislock.Locker
	for name, err := range map[string]error{
		"nil locker":       distlock.Do(t.Context(), nil, "k", nil, fn),
		"typed nil locker": distlock.Do(t.Context(), nilRedis, "k", nil, fn),
		"nil fn":           distlock.Do(t.Context(), nilRedis, "k", nil, nil),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := distlock.DoValue[int](t.Context(), nil, "k", nil, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("DoValue(nil, nil) = %v", err)
	}
	a, _, _ := redisLockers(t)
	if err := distlock.Do(t.Context(), a, "", nil, fn); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

// TestDoValue: the value fn returns comes back, also with the loss of the
// lease (the work was done).
func TestDoValue(t *testing.T) {
	a, _, key := redisLockers(t)
	v, err := distlock.DoValue(t.Context(), a, key, nil, func(_ context.Context, l distlock.Lease) (fenced.Token, error) {
		return l.Token(), nil
	})
	if err != nil || !v.Valid() {
		t.Fatalf("DoValue = %v, %v", v, err)
	}
	n, err := distlock.DoValue(t.Context(), a, key, &distlock.Options{TTL: 300 * time.Millisecond}, func(ctx context.Context, _ distlock.Lease) (int, error) {
		<-ctx.Done()
		return 42, nil
	})
	if n != 42 || !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("DoValue after a loss = %v, %v; want 42, ErrLeaseLost", n, err)
	}
}
