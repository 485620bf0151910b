package pessimisticmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/retry"
)

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
// server's lock timeout (WAIT n) is reported with the package, the table,
// the statement's duration and the error; a granted lock is not.
func TestLockWaitHook(t *testing.T) {
	t.Parallel()
	db := myDB(t, 4)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'a', 1), (2, 'b', 1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := pessimisticmysql.LockRows(ctx, holder, "inventory", "id", []int64{1}, pessimistic.Lock{}); err != nil {
		t.Fatal(err)
	}
	var rec lockWaits
	hctx := rec.ctx(ctx)
	for _, tc := range []struct {
		name    string
		lock    pessimistic.Lock
		keys    []int64
		wantErr error
	}{
		{"NoWait", pessimistic.Lock{Wait: pessimistic.NoWait}, []int64{1}, pessimistic.ErrLockNotAvailable},
		{"WaitTimeout", pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: time.Second}, []int64{1, 2}, pessimistic.ErrLockTimeout},
		{"Granted", pessimistic.Lock{Wait: pessimistic.NoWait}, []int64{2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pessimisticmysql.InTx(hctx, db, &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 1}}, func(ctx context.Context, tx *sql.Tx) error {
				_, err := pessimisticmysql.LockRows(ctx, tx, "inventory", "id", tc.keys, tc.lock)
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
			if e.Package != "pessimisticmysql" || e.Key != "inventory" || e.Attempts != 1 || !errors.Is(e.Err, tc.wantErr) || e.Wait <= 0 {
				t.Fatalf("event %+v", e)
			}
			if tc.lock.Wait == pessimistic.WaitTimeout && e.Wait < tc.lock.Timeout {
				t.Fatalf("Wait %v, shorter than WAIT %v", e.Wait, tc.lock.Timeout)
			}
		})
	}
}
