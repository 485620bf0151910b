// Package sagatest is the behaviour suite every saga store runs against
// its real server (sagapg on PostgreSQL, sagamysql on MariaDB) and, for
// the core's own tests, an in-memory store that keeps the same contract.
package sagatest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concurkit/concurkit/saga"
)

// MemoryStore is a saga.Store in memory, for tests of the core. Kill makes
// every later call fail, like a connection killed on the server.
type MemoryStore struct {
	mu    *sync.Mutex
	recs  map[string]*saga.Record
	locks map[string]chan struct{} // LockRow: closed at unlock
	dead  atomic.Bool
	saves atomic.Int64 // Saves and Extends that succeeded
}

// NewMemory returns an empty store.
func NewMemory() *MemoryStore {
	return &MemoryStore{mu: new(sync.Mutex), recs: map[string]*saga.Record{}, locks: map[string]chan struct{}{}}
}

// Handle returns another handle on the same records (a second
// "connection"), alive whatever happens to m.
func (m *MemoryStore) Handle() *MemoryStore {
	return &MemoryStore{mu: m.mu, recs: m.recs, locks: m.locks}
}

// LockRow makes Claim, Save and Extend of key wait (until unlock, or their
// context ends) as a row lock held by another transaction would, and
// returns the lease end stored now.
func (m *MemoryStore) LockRow(key string) (leaseUntil time.Time, unlock func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	m.locks[key] = ch
	if r, ok := m.recs[key]; ok {
		leaseUntil = r.LeaseUntil
	}
	var once sync.Once
	return leaseUntil, func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.locks, key)
			m.mu.Unlock()
			close(ch)
		})
	}
}

// wait waits until key is not locked by LockRow, or ctx ends.
func (m *MemoryStore) wait(ctx context.Context, key string) error {
	m.mu.Lock()
	ch := m.locks[key]
	m.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrKilled is returned by a killed MemoryStore.
var ErrKilled = errors.New("sagatest: connection killed")

// Kill makes every later call on this handle fail with ErrKilled.
func (m *MemoryStore) Kill() { m.dead.Store(true) }

func clone(r *saga.Record) *saga.Record {
	c := *r
	c.Input = bytes.Clone(r.Input)
	c.InputHash = bytes.Clone(r.InputHash)
	c.Steps = slices.Clone(r.Steps)
	for i := range c.Steps {
		c.Steps[i].Result = bytes.Clone(c.Steps[i].Result)
	}
	return &c
}

// Claim implements saga.Store.
func (m *MemoryStore) Claim(ctx context.Context, fresh *saga.Record, now time.Time) (*saga.Record, bool, error) {
	if err := m.wait(ctx, fresh.Key); err != nil {
		return nil, false, err
	}
	if err := m.check(ctx); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[fresh.Key]
	if !ok {
		m.recs[fresh.Key] = clone(fresh)
		return clone(fresh), true, nil
	}
	if r.Status.Finished() || (!r.LeaseUntil.IsZero() && r.LeaseUntil.After(now)) {
		return clone(r), false, nil
	}
	r.Claim, r.LeaseUntil, r.Updated = fresh.Claim, fresh.LeaseUntil, fresh.Updated
	return clone(r), true, nil
}

// Save implements saga.Store.
func (m *MemoryStore) Save(ctx context.Context, rec *saga.Record) error {
	if err := m.wait(ctx, rec.Key); err != nil {
		return err
	}
	if err := m.check(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[rec.Key]
	if !ok || r.Claim != rec.Claim {
		return saga.ErrLeaseLost
	}
	c := clone(rec)
	r.Status, r.Steps, r.Error, r.LeaseUntil, r.Updated = c.Status, c.Steps, c.Error, c.LeaseUntil, c.Updated
	m.saves.Add(1)
	return nil
}

// Extend implements saga.Store.
func (m *MemoryStore) Extend(ctx context.Context, key string, claim int64, until time.Time) error {
	if err := m.wait(ctx, key); err != nil {
		return err
	}
	if err := m.check(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[key]
	if !ok || r.Claim != claim {
		return saga.ErrLeaseLost
	}
	r.LeaseUntil = until
	m.saves.Add(1)
	return nil
}

// Load returns a copy of the instance key, or saga.ErrNotFound.
func (m *MemoryStore) Load(ctx context.Context, key string) (*saga.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[key]
	if !ok {
		return nil, saga.ErrNotFound
	}
	return clone(r), nil
}

// Unfinished lists unfinished instances whose lease is free or ended at
// now, oldest update first.
func (m *MemoryStore) Unfinished(ctx context.Context, now time.Time, limit int) ([]*saga.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*saga.Record
	for _, r := range m.recs {
		if !r.Status.Finished() && (r.LeaseUntil.IsZero() || !r.LeaseUntil.After(now)) {
			out = append(out, clone(r))
		}
	}
	slices.SortFunc(out, func(a, b *saga.Record) int { return a.Updated.Compare(b.Updated) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *MemoryStore) check(ctx context.Context) error {
	if m.dead.Load() {
		return ErrKilled
	}
	return ctx.Err()
}

var _ saga.Store = (*MemoryStore)(nil)
