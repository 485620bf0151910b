package pglock_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/testkit"
)

// TestExtendHonoursCancellation: with the server unreachable mid-lease (a
// proxy that stops forwarding, as a frozen server or a partition looks to
// the client), Extend returns when its context ends — the old code waited
// for the renewal query, bounded only by the TTL — and the lease keeps its
// deadline (an unanswered renewal is not a loss). Release then returns by
// its caller's deadline too, and after the thaw the lock is free again.
func TestExtendHonoursCancellation(t *testing.T) {
	u, err := url.Parse(pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	l, err := pglock.New(testkit.PostgresPoolFor(t, u.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = l.Close(ctx)
	})
	key := distlocktest.Key(t)
	const ttl = 20 * time.Second
	lz, err := l.Acquire(t.Context(), key, &distlock.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	dl, _ := lz.Deadline()

	proxy.Freeze()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	start := time.Now()
	err = lz.Extend(ctx, 0)
	took := time.Since(start)
	cancel()
	t.Logf("Extend against a frozen server returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("Extend = %v, want DeadlineExceeded (and not ErrLeaseLost)", err)
	}
	if took > ttl/2 {
		t.Fatalf("Extend returned after %v, its context ended after 300ms", took)
	}
	if !lz.Valid() {
		t.Fatal("an unanswered renewal ended the lease")
	}
	if got, _ := lz.Deadline(); !got.Equal(dl) {
		t.Fatalf("deadline moved from %v to %v by a renewal that did not complete", dl, got)
	}
	rctx, rcancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	start = time.Now()
	rerr := lz.Release(rctx)
	took = time.Since(start)
	rcancel()
	if rerr == nil || took > ttl/2 {
		t.Fatalf("Release against a frozen server = %v after %v, want an unconfirmed release by its deadline", rerr, took)
	}
	proxy.Thaw()
	// The cleanup goes on in the background and unlocks once thawed.
	other, err := pglock.New(pool(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer ccancel()
	b, err := other.Acquire(cctx, key, nil)
	if err != nil {
		t.Fatalf("Acquire after the thaw: %v", err)
	}
	if err := b.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestAbandonedAcquireAnswerLost: a try-lock that the server applies but
// whose answer never reaches the client (a proxy holds the replies: a
// partition after the request arrived) leaves the lock held by a session
// nobody will use. The Locker closes that session when its caller gives
// up, so the server frees the lock as the backend exits: another Locker
// gets the key within seconds, not at the idle timeout (the TTL, a
// minute here).
func TestAbandonedAcquireAnswerLost(t *testing.T) {
	u, err := url.Parse(pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	a, err := pglock.New(testkit.PostgresPoolFor(t, u.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pglock.New(pool(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*pglock.Locker{a, b} {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = l.Close(ctx)
		})
	}
	key := distlocktest.Key(t)
	proxy.FreezeReplies()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = a.Acquire(ctx, key, &distlock.Options{TTL: time.Minute})
	cancel()
	proxy.Thaw()
	if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire without answers = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	bctx, bcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer bcancel()
	lz, err := b.Acquire(bctx, key, nil)
	if err != nil {
		t.Fatalf("Acquire by another Locker after the abandoned try-lock: %v (its session kept the lock)", err)
	}
	if err := lz.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestAbandonedTryLandsAfterRelease: a waiter's try-lock is on its way
// (held in a frozen network) when its caller gives up; the holder
// releases; then the network thaws and the statement reaches the server,
// which grants it — on a session whose caller is gone. Close of the
// waiter's Locker waits for that answer and unlocks, so another Locker
// gets the key at once (CancelWhileWaiting's "the waiter left state
// behind", seen once on a loaded CI machine, is this case).
func TestAbandonedTryLandsAfterRelease(t *testing.T) {
	u, err := url.Parse(pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	// Polling every 5 ms at most: once the network froze, a try is in it
	// within a few milliseconds.
	waiter, err := pglock.New(testkit.PostgresPoolFor(t, u.String()), &pglock.Config{PollMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	direct := pool(t)
	holder, err := pglock.New(direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pglock.New(direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*pglock.Locker{waiter, holder, other} {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = l.Close(ctx)
		})
	}
	key := distlocktest.Key(t)
	held, err := holder.Acquire(t.Context(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The waiter polls until the network freezes under it; its next
	// try-lock stays in the proxy until the thaw.
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() {
		lz, err := waiter.Acquire(ctx, key, nil)
		if lz != nil {
			err = errors.New("acquired a held key")
		}
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter poll a few times: timing, not correctness
	proxy.Freeze()
	time.Sleep(100 * time.Millisecond) // 20 poll periods: a try is now in the frozen network
	cancel()
	if err := <-waited; !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned Acquire = %v, want ErrNotAcquired and Canceled", err)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	proxy.Thaw()
	cctx, ccancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer ccancel()
	if err := waiter.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	lz, err := other.TryAcquire(t.Context(), key, nil)
	if err != nil {
		t.Fatalf("TryAcquire after the waiter's Locker closed: %v (the abandoned try took the lock and kept it)", err)
	}
	if err := lz.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
