package zklock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/testkit"
)

// checkReleaseError: a lost lease's Release reports the loss once, with
// one prefix, and does not claim a deletion still to come when the
// session has expired.
func checkReleaseError(t *testing.T, err error, expired bool) {
	t.Helper()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case !errors.Is(err, distlock.ErrLeaseLost):
		t.Errorf("Release = %v, want ErrLeaseLost", err)
	case strings.Count(msg, "zklock: release") > 1:
		t.Errorf("Release error repeats its prefix: %q", msg)
	case expired && strings.Contains(msg, "will be deleted after reconnecting"):
		t.Errorf("Release error promises a deletion the expired session already did: %q", msg)
	}
}

// TestReleaseLostLeaseDuringPartition: a holder cut off from ZooKeeper
// loses its lease at once (it cannot know whether its session survives).
// Releasing that lease must not wait: neither for the requested TTL (90 s,
// which the server lowered to its maximum, 60 s) nor for the reconnection;
// its node is deleted after reconnecting (same session) or by the server
// (expired session). Once the session has expired, the error says so.
func TestReleaseLostLeaseDuringPartition(t *testing.T) {
	servers, root := testkit.ZooKeeper(t)
	admin := testkit.ZooKeeperConn(t, servers)

	t.Run("session alive", func(t *testing.T) {
		net := &faultyNet{}
		a := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
		la, err := a.Acquire(t.Context(), "long", &distlock.Options{TTL: 90 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		net.partition()
		<-la.Context().Done()
		type result struct {
			err  error
			took time.Duration
		}
		done := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err := la.Release(ctx)
			done <- result{err, time.Since(start)}
		}()
		select {
		case r := <-done:
			t.Logf("Release while partitioned: %v after %v", r.err, r.took.Round(time.Millisecond))
			checkReleaseError(t, r.err, false)
		case <-time.After(5 * time.Second):
			t.Errorf("Release of a lost lease still waiting after 5 s (partitioned)")
			net.heal()
			r := <-done
			t.Logf("Release returned %v after %v, once healed", r.err, r.took.Round(time.Millisecond))
		}
		net.heal()
		// The node goes as soon as the client is back on its session.
		waitChildren(t, admin, root+"/long", func(n int) bool { return n == 0 })
	})

	t.Run("session expired", func(t *testing.T) {
		net := &faultyNet{}
		a := newLocker(t, servers, &zklock.Config{Root: root, Dialer: net.Dial})
		la, err := a.Acquire(t.Context(), "short", &distlock.Options{TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		net.partition()
		defer net.heal()
		<-la.Context().Done()
		// The server expires the session after 2 s and deletes the node.
		waitChildren(t, admin, root+"/"+url.PathEscape("short"), func(n int) bool { return n == 0 })
		time.Sleep(100 * time.Millisecond) // the session timeout has passed on our side too
		start := time.Now()
		err = la.Release(context.Background())
		took := time.Since(start)
		t.Logf("Release after the session expired: %v after %v", err, took.Round(time.Millisecond))
		checkReleaseError(t, err, true)
		if took > time.Second {
			t.Errorf("Release took %v", took)
		}
	})
}
