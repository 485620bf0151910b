package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
)

// TestGroupCloseReleasesAndWaits: Close releases every lease still
// registered (also one already lost), waits for a background goroutine
// and a cleanup its caller stopped waiting for, refuses new leases, and
// returns nil; a lease released before Close is not released again.
func TestGroupCloseReleasesAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g lease.Group
		var released atomic.Int32
		newLease := func() *lease.Lease {
			l, err := lease.New(lease.Config{Key: "k", Token: 1, TTL: time.Minute, Group: &g,
				Backend: lease.Backend{Release: func(ctx context.Context) error {
					released.Add(1)
					select { // a slow server: 2 s per cleanup
					case <-time.After(2 * time.Second):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}}})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		held, lost, early := newLease(), newLease(), newLease()
		lost.Lost(errors.New("session gone"))
		if err := early.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		// A release whose caller stops waiting at once: its cleanup goes on
		// in the Group.
		abandoned := newLease()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := abandoned.Release(ctx); !errors.Is(err, concurkit.ErrOutcomeUnknown) {
			t.Fatalf("Release with a cancelled context = %v", err)
		}
		var ran atomic.Bool
		g.Go(func() { time.Sleep(5 * time.Second); ran.Store(true) })

		start := time.Now()
		if err := g.Close(context.Background(), "test"); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if took := time.Since(start); took != 5*time.Second || !ran.Load() {
			t.Fatalf("Close returned after %v (goroutine done %v), want it to wait for the 5 s goroutine", took, ran.Load())
		}
		if n := released.Load(); n != 4 { // early, abandoned, then held and lost by Close
			t.Fatalf("%d releases, want 4 (each lease once)", n)
		}
		if held.Valid() || !errors.Is(context.Cause(held.Context()), distlock.ErrReleased) {
			t.Fatalf("held lease after Close: valid %v, cause %v", held.Valid(), context.Cause(held.Context()))
		}
		if _, err := lease.New(lease.Config{Key: "k", Token: 2, Group: &g}); !errors.Is(err, distlock.ErrClosed) || !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("New after Close = %v, want ErrClosed and ErrNotAcquired", err)
		}
		select {
		case <-g.Done():
		default:
			t.Fatal("Done not closed after Close")
		}
		if err := g.Close(context.Background(), "test"); err != nil {
			t.Fatalf("second Close = %v", err)
		}
	})
}

// TestGroupCloseBoundedByContext: a cleanup that outlasts Close's context
// makes Close return at the deadline with an error matching both
// ctx.Err() and concurkit.ErrOutcomeUnknown; a later Close waits for the
// rest.
func TestGroupCloseBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g lease.Group
		g.Go(func() { time.Sleep(10 * time.Second) })
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := g.Close(ctx, "test")
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, concurkit.ErrOutcomeUnknown) {
			t.Fatalf("Close = %v, want DeadlineExceeded and ErrOutcomeUnknown", err)
		}
		start := time.Now()
		if err := g.Close(context.Background(), "test"); err != nil || time.Since(start) != 9*time.Second {
			t.Fatalf("second Close = %v after %v, want nil after the remaining 9 s", err, time.Since(start))
		}
	})
}

// TestGroupBind: a context from Bind ends when Close is called, and
// Closing tells that apart from the parent's cancellation.
func TestGroupBind(t *testing.T) {
	var g lease.Group
	parent, cancelParent := context.WithCancel(context.Background())
	a, stopA := g.Bind(parent)
	defer stopA()
	cancelParent()
	<-a.Done()
	if lease.Closing(a) {
		t.Fatal("Closing true for a context whose parent was cancelled")
	}
	b, stopB := g.Bind(context.Background())
	defer stopB()
	if err := g.Close(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	if !lease.Closing(b) {
		t.Fatalf("Closing false after Close; cause %v", context.Cause(b))
	}
}
