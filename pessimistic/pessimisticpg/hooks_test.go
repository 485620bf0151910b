package pessimisticpg_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

// lockWaits records LockWait events.
type lockWaits struct {
	mu     sync.Mutex
	events []observe.LockWaitEvent
}

func (r *lockWaits) ctx(parent context.Context) context.Context {
	return observe.WithHooks(parent, &observe.Hooks{LockWait: func(_ context.Context, e observe.LockWaitEvent) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
	}})
}

func (r *lockWaits) take() []observe.LockWaitEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// TestLockWaitHook: a lock statement that fails by NOWAIT or by the
// server's lock timeout is reported with the package, the table (not the
// keys), the statement's duration and the error; a lock that is granted
// is not reported; an advisory lock reports its key.
func TestLockWaitHook(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1), (2, 'b', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	key := pessimistic.AdvisoryKey(t.Name())
	if _, err := pessimisticpg.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
		t.Fatal(err)
	}
	if err := pessimisticpg.AdvisoryXactLock(ctx, holder, key); err != nil {
		t.Fatal(err)
	}

	var rec lockWaits
	hctx := rec.ctx(ctx)
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		lock    pessimistic.Lock
		keys    []int64
		wantErr error
	}{
		{"NoWait", pessimistic.Lock{Wait: pessimistic.NoWait}, []int64{1}, pessimistic.ErrLockNotAvailable},
		{"WaitTimeout", pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: timeout}, []int64{1, 2}, pessimistic.ErrLockTimeout},
		{"Granted", pessimistic.Lock{Wait: pessimistic.NoWait}, []int64{2}, nil},
		{"Skipped", pessimistic.Lock{Wait: pessimistic.SkipLocked}, []int64{1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pessimisticpg.InTx(hctx, pool, &pessimistic.Options{Retry: once}, func(ctx context.Context, tx pgx.Tx) error {
				_, err := pessimisticpg.LockRows(ctx, tx, "inventory", "id", tc.keys, tc.lock)
				return err
			})
			if !errors.Is(err, tc.wantErr) || tc.wantErr == nil && err != nil {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			got := rec.take()
			if tc.wantErr == nil {
				if len(got) != 0 {
					t.Fatalf("events %+v for a granted lock", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d events, want 1: %+v", len(got), got)
			}
			e := got[0]
			if e.Package != "pessimisticpg" || e.Key != "inventory" || e.Attempts != 1 || !errors.Is(e.Err, tc.wantErr) || e.Wait <= 0 {
				t.Fatalf("event %+v", e)
			}
			if tc.lock.Wait == pessimistic.WaitTimeout && e.Wait < timeout {
				t.Fatalf("Wait %v, shorter than the lock timeout %v", e.Wait, timeout)
			}
		})
	}

	// Advisory: TryAdvisoryXactLock's "not available" and
	// AdvisoryXactLock's lock_timeout.
	err = pessimisticpg.InTx(hctx, pool, &pessimistic.Options{Retry: once, LockTimeout: timeout}, func(ctx context.Context, tx pgx.Tx) error {
		if err := pessimisticpg.TryAdvisoryXactLock(ctx, tx, key); !errors.Is(err, pessimistic.ErrLockNotAvailable) {
			t.Errorf("try: %v", err)
		}
		return pessimisticpg.AdvisoryXactLock(ctx, tx, key)
	})
	if !errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Fatalf("AdvisoryXactLock = %v, want ErrLockTimeout", err)
	}
	got := rec.take()
	if len(got) != 2 || got[0].Key != strconv.FormatInt(key, 10) || !errors.Is(got[0].Err, pessimistic.ErrLockNotAvailable) ||
		got[1].Key != got[0].Key || !errors.Is(got[1].Err, pessimistic.ErrLockTimeout) || got[1].Wait < timeout {
		t.Fatalf("advisory events %+v", got)
	}
}
