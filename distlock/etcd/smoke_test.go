package etcd_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/concurkit/concurkit/distlock/etcd"
)

func TestSmoke(t *testing.T) {
	c, prefix := etcdSingle(t)
	l, err := etcd.New(c, &etcd.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}

	var flag atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				ls, err := l.Acquire(t.Context(), "k/1", nil)
				if err != nil {
					t.Error(err)
					return
				}
				if !flag.CompareAndSwap(false, true) {
					t.Error("two holders")
				}
				mu.Lock()
				if int64(ls.Token()) <= last {
					t.Errorf("token %d after %d", ls.Token(), last)
				}
				last = int64(ls.Token())
				mu.Unlock()
				flag.Store(false)
				if err := ls.Release(t.Context()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	t.Log("last token", last)
}
