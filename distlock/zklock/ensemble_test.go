package zklock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/testkit"
)

// zkMode asks a server for its role with the srvr four-letter word:
// "leader", "follower", "standalone", or "" if it does not answer.
func zkMode(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return ""
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(mode)
		}
	}
	return ""
}

// TestEnsembleLeaderKill: four workers take turns on one lock of a private
// 3-node ensemble and write through a fenced table; the ensemble leader is
// SIGKILLed mid-run. Locking must continue after the re-election, storage
// must accept writes only in token order, and no two holders may ever be
// inside a section with accepted writes at the same time.
func TestEnsembleLeaderKill(t *testing.T) {
	procs := testkit.StartZooKeeperEnsemble(t, 3)
	servers := testkit.Addrs(procs)
	db := fenceTable(t)
	guard := fenced.Table{Name: "fence"}

	var (
		holder          atomic.Int32 // worker inside a section with an accepted write
		accepted, stale atomic.Int64
		afterKill       atomic.Int64
		killed          atomic.Bool
		killedAt        time.Time
		resumedAfter    atomic.Int64 // ns from the kill to the first accepted section
		mu              sync.Mutex
		lastAccepted    fenced.Token
		acquireErrs     atomic.Int64
		progress        = make(chan struct{}, 1)
		stop            = make(chan struct{})
		wg              sync.WaitGroup
	)
	write := func(ls distlock.Lease, w int32) error {
		// A holder may be slower than its lease: the write itself is not
		// cancelled with the lease context, storage has the last word.
		err := fencedpg.Write(context.Background(), db, guard, 1, ls.Token(), map[string]any{"value": fmt.Sprint(w)})
		if err == nil {
			mu.Lock()
			if ls.Token() < lastAccepted {
				t.Errorf("storage accepted token %d after %d", ls.Token(), lastAccepted)
			}
			lastAccepted = ls.Token()
			mu.Unlock()
		}
		return err
	}
	for w := int32(1); w <= 4; w++ {
		wg.Go(func() {
			l, err := zklock.New(servers, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer l.Close(context.Background())
			for {
				select {
				case <-stop:
					return
				default:
				}
				actx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				ls, err := l.Acquire(actx, "k", &distlock.Options{TTL: 4 * time.Second})
				cancel()
				if err != nil {
					if acquireErrs.Add(1) <= 5 {
						t.Logf("worker %d: acquire: %v", w, err)
					}
					continue
				}
				postKill := killed.Load() // acquired after the kill
				switch err := write(ls, w); {
				case err == nil:
					if !holder.CompareAndSwap(0, w) {
						t.Errorf("worker %d has an accepted write while worker %d is in its section", w, holder.Load())
					}
					if ls.Context().Err() == nil {
						if err := write(ls, w); err != nil && !errors.Is(err, fenced.ErrStaleToken) {
							t.Error(err)
						}
					}
					holder.CompareAndSwap(w, 0)
					accepted.Add(1)
					if postKill && afterKill.Add(1) == 1 {
						resumedAfter.Store(int64(time.Since(killedAt)))
					}
					select {
					case progress <- struct{}{}:
					default:
					}
				case errors.Is(err, fenced.ErrStaleToken):
					stale.Add(1)
				default:
					t.Error(err)
				}
				_ = ls.Release(context.Background())
			}
		})
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.NewTimer(60 * time.Second)
		defer timeout.Stop()
		for !cond() {
			select {
			case <-progress:
			case <-timeout.C:
				close(stop)
				wg.Wait()
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("20 sections before the kill", func() bool { return accepted.Load() >= 20 })
	leader := -1
	for i, p := range procs {
		if zkMode(p.Addr) == "leader" {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader found with srvr")
	}
	before := accepted.Load()
	procs[leader].Kill(t)
	killedAt = time.Now()
	killed.Store(true) // publishes killedAt
	t.Logf("killed leader %s after %d sections", procs[leader].Addr, before)
	waitFor("20 sections after the kill", func() bool { return afterKill.Load() >= 20 })
	close(stop)
	wg.Wait()

	newLeader := ""
	for i, p := range procs {
		if i != leader && zkMode(p.Addr) == "leader" {
			newLeader = p.Addr
		}
	}
	t.Logf("locking resumed %v after the kill", time.Duration(resumedAfter.Load()).Round(time.Millisecond))
	t.Logf("new leader %s; sections %d (after kill %d), stale writes rejected %d, acquire errors %d",
		newLeader, accepted.Load(), afterKill.Load(), stale.Load(), acquireErrs.Load())
	if newLeader == "" {
		t.Error("no new leader among the survivors")
	}
}
