package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/testkit"
)

// leaderOf returns the index of the member that reports itself leader, or -1.
func leaderOf(ctx context.Context, c *clientv3.Client, eps []string, skip int) int {
	for i, ep := range eps {
		if i == skip {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// TestClusterMemberKill: four workers, each with its own client of a
// private 3-member cluster, take turns on one lock and write through a
// fenced table; the leader is SIGKILLed mid-run. Locking must continue
// after the election, storage must accept writes only in token order, and
// no two holders may be inside a section with accepted writes at once.
func TestClusterMemberKill(t *testing.T) {
	procs := testkit.StartEtcdCluster(t, 3)
	eps := testkit.Addrs(procs)
	db := fenceTable(t)
	guard := fenced.Table{Name: "fence"}
	const prefix = "/kill/"

	var (
		holder          atomic.Int32
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
		// Not cancelled with the lease context: storage has the last word.
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
		c := testkit.EtcdClient(t, eps, "")
		l, err := etcdlock.New(c, &etcdlock.Config{Prefix: prefix})
		t.Cleanup(func() { closeLocker(t, l) })
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				actx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				ls, err := l.Acquire(actx, "k", &distlock.Options{TTL: 5 * time.Second})
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
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = ls.Release(rctx)
				cancel()
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
	admin := testkit.EtcdClient(t, eps, "")
	waitFor("20 sections before the kill", func() bool { return accepted.Load() >= 20 })
	leader := leaderOf(t.Context(), admin, eps, -1)
	if leader < 0 {
		t.Fatal("no leader found with Status")
	}
	before := accepted.Load()
	procs[leader].Kill(t)
	killedAt = time.Now()
	killed.Store(true) // publishes killedAt
	t.Logf("killed leader %s after %d sections", procs[leader].Addr, before)
	waitFor("20 sections after the kill", func() bool { return afterKill.Load() >= 20 })
	close(stop)
	wg.Wait()

	newLeader := leaderOf(t.Context(), admin, eps, leader)
	t.Logf("locking resumed %v after the kill", time.Duration(resumedAfter.Load()).Round(time.Millisecond))
	t.Logf("new leader %d; sections %d (after kill %d), stale writes rejected %d, acquire errors %d",
		newLeader, accepted.Load(), afterKill.Load(), stale.Load(), acquireErrs.Load())
	if newLeader < 0 {
		t.Error("no new leader among the survivors")
	}
}
